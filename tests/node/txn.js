// kafkajs transactions against one broker; prints what happened as JSON.
//
//   node txn.js BOOTSTRAP TOPIC SOURCE GROUP
//
// Creates TOPIC (2 partitions) and SOURCE (1 partition; 10 plain records, the input whose
// offsets the transactions "consume"), then with one transactional producer:
//   1. a transaction of 6 records "c1-N" over both partitions plus sendOffsets(SOURCE:0 -> 4)
//      for GROUP, committed;
//   2. a transaction of 6 records "a2-N" plus sendOffsets(SOURCE:0 -> 7), aborted;
//   3. a transaction of 4 records "c3-N", committed.
// After each, GROUP's committed offsets (admin.fetchOffsets). Then a read_committed
// consumer (readUncommitted: false) and a read_uncommitted one each read TOPIC from the
// beginning until they hold `expect` records and 500 ms more have brought nothing.
// The last line of stdout is one JSON object:
//   offsets:      [offset of SOURCE:0 for GROUP after transaction 1, 2, 3]
//   committed:    [values read by the read_committed consumer]
//   uncommitted:  [values read by the read_uncommitted consumer]
//   error:        set if the scenario itself failed
// tests/e2e/test_kafkajs_transactions.py asserts on it.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const STEP_TIMEOUT_MS = 30000
const QUIET_MS = 500

function describeError(e) {
  return { name: e && e.name, type: e && e.type, code: e && e.code, message: String(e && e.message) }
}

function spread(tag, count) {
  const out = []
  for (let i = 0; i < count; i++) out.push({ partition: i % 2, value: `${tag}-${String(i).padStart(4, '0')}` })
  return out
}

async function readAll(kafka, topic, readUncommitted, expect) {
  const consumer = kafka.consumer({
    groupId: `reader-${readUncommitted ? 'uncommitted' : 'committed'}-${Date.now()}`,
    readUncommitted,
    sessionTimeout: 6000,
    heartbeatInterval: 500,
    maxWaitTimeInMs: 100,
  })
  const values = []
  let last = Date.now()
  await consumer.connect()
  try {
    await consumer.subscribe({ topic, fromBeginning: true })
    await consumer.run({
      eachMessage: async ({ message }) => {
        values.push(message.value.toString())
        last = Date.now()
      },
    })
    const deadline = Date.now() + STEP_TIMEOUT_MS
    while (!(values.length >= expect && Date.now() - last > QUIET_MS)) {
      if (Date.now() > deadline) throw new Error(`read ${values.length} of ${expect} records`)
      await new Promise(resolve => setTimeout(resolve, 50))
    }
  } finally {
    await consumer.disconnect()
  }
  return values.sort()
}

async function main() {
  const [bootstrap, topic, source, groupId] = process.argv.slice(2)
  const kafka = new Kafka({
    clientId: 'brokerd-kafkajs-txn',
    brokers: [bootstrap],
    retry: { retries: 8, initialRetryTime: 100, maxRetryTime: 1000 },
    logLevel: logLevel.ERROR,
    logCreator: () => ({ namespace, log }) => process.stderr.write(`${namespace}: ${log.message}\n`),
  })
  const out = { offsets: [] }
  const admin = kafka.admin()
  const plain = kafka.producer()
  const producer = kafka.producer({ transactionalId: 'kafkajs-txn', maxInFlightRequests: 1, idempotent: true })
  try {
    await admin.connect()
    await admin.createTopics({
      topics: [
        { topic, numPartitions: 2, replicationFactor: 1 },
        { topic: source, numPartitions: 1, replicationFactor: 1 },
      ],
    })
    await plain.connect()
    await plain.send({ topic: source, messages: spread('in', 10).map(m => ({ ...m, partition: 0 })) })
    await producer.connect()

    const steps = [
      { tag: 'c1', count: 6, offset: '4', commit: true },
      { tag: 'a2', count: 6, offset: '7', commit: false },
      { tag: 'c3', count: 4, offset: null, commit: true },
    ]
    for (const step of steps) {
      const txn = await producer.transaction()
      await txn.send({ topic, messages: spread(step.tag, step.count) })
      if (step.offset !== null) {
        await txn.sendOffsets({
          consumerGroupId: groupId,
          topics: [{ topic: source, partitions: [{ partition: 0, offset: step.offset }] }],
        })
      }
      if (step.commit) await txn.commit()
      else await txn.abort()
      const [fetched] = await admin.fetchOffsets({ groupId, topics: [source] })
      out.offsets.push(Number(fetched.partitions.find(p => p.partition === 0).offset))
    }
    out.committed = await readAll(kafka, topic, false, 10)
    out.uncommitted = await readAll(kafka, topic, true, 16)
  } catch (e) {
    out.error = describeError(e)
  } finally {
    for (const client of [producer, plain, admin]) {
      try {
        await client.disconnect()
      } catch (e) {
        // already failed: the error above is what matters
      }
    }
  }
  process.stdout.write(JSON.stringify(out) + '\n')
}

main().catch(e => {
  process.stdout.write(JSON.stringify({ fatal: describeError(e) }) + '\n')
  process.exit(1)
})
