// A kafkajs consumer group of two members against one broker; prints what happened as JSON.
//
//   node group.js BOOTSTRAP TOPIC GROUP PARTITIONS COUNT
//
// Creates TOPIC with PARTITIONS partitions, starts members "a" and "b" in GROUP, produces
// COUNT records (round-robin over the partitions) once both have partitions, lets them
// consume every record, asks the
// admin client to list and describe the group while both are in it, stops "b" (it commits
// and leaves the group), produces COUNT more records, lets "a" consume them, stops "a",
// and reads the committed offsets. The last line of stdout is one JSON object:
//   produced:   {partition: records produced}
//   joins:      {member: [[partitions assigned], ...]} one entry per completed rebalance
//   split:      {member: [partitions]} when both members had partitions
//   consumed:   [[member, partition, offset, value], ...]
//   committed:  what admin.fetchOffsets returned after both stopped
//   listGroups, describeGroups, deleteGroups: admin calls made while both members are in
//               the group, {ok: ...} or {error: ...} (probes: their failure is data)
//   error:      set if the scenario itself failed (then the rest is what got that far)
// tests/e2e/test_kafkajs.py asserts on it.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

const STEP_TIMEOUT_MS = 30000

function describeError(e) {
  const out = { name: e && e.name, type: e && e.type, code: e && e.code, message: String(e && e.message) }
  // KafkaJSDeleteGroupsError: the error of each group.
  if (e && Array.isArray(e.groups)) {
    out.errors = e.groups.map(g => ({ ...describeError(g.error || {}), item: g.groupId }))
  }
  return out
}

async function waitFor(what, predicate) {
  const deadline = Date.now() + STEP_TIMEOUT_MS
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 50))
  }
}

async function probe(fn) {
  try {
    return { ok: await fn() }
  } catch (e) {
    return { error: describeError(e) }
  }
}

async function main() {
  const [bootstrap, topic, groupId, partitionsArg, countArg] = process.argv.slice(2)
  const partitions = Number(partitionsArg)
  const count = Number(countArg)
  const kafka = new Kafka({
    clientId: 'brokerd-kafkajs-group',
    brokers: [bootstrap],
    retry: { retries: 5, initialRetryTime: 100, maxRetryTime: 1000 },
    logLevel: logLevel.ERROR,
    logCreator: () => ({ namespace, log }) =>
      process.stderr.write(`${namespace}: ${log.message}\n`),
  })
  const out = { produced: {}, joins: { a: [], b: [] }, consumed: [] }
  const admin = kafka.admin()
  const producer = kafka.producer()
  const members = {}
  try {
    await admin.connect()
    await admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }] })
    await producer.connect()

    let sent = 0
    const produce = async n => {
      const messages = []
      for (let i = 0; i < n; i++, sent++) {
        const partition = sent % partitions
        out.produced[partition] = (out.produced[partition] || 0) + 1
        messages.push({ partition, value: `v-${sent}` })
      }
      await producer.send({ topic, messages })
    }
    for (const name of ['a', 'b']) {
      const consumer = kafka.consumer({
        groupId,
        sessionTimeout: 6000,
        rebalanceTimeout: 10000,
        heartbeatInterval: 500,
        maxWaitTimeInMs: 200,
      })
      consumer.on(consumer.events.GROUP_JOIN, event => {
        const assigned = event.payload.memberAssignment[topic] || []
        out.joins[name].push([...assigned].sort((x, y) => x - y))
      })
      await consumer.connect()
      await consumer.subscribe({ topic, fromBeginning: true })
      await consumer.run({
        eachMessage: async ({ partition, message }) => {
          out.consumed.push([name, partition, Number(message.offset), message.value.toString()])
        },
      })
      members[name] = consumer
    }

    const lastJoin = name => out.joins[name][out.joins[name].length - 1] || []
    await waitFor('both members assigned', () =>
      lastJoin('a').length > 0 && lastJoin('b').length > 0 &&
      lastJoin('a').length + lastJoin('b').length === partitions)
    out.split = { a: lastJoin('a'), b: lastJoin('b') }
    await produce(count)
    await waitFor(`${count} records`, () => out.consumed.length >= count)
    out.listGroups = await probe(() => admin.listGroups())
    out.describeGroups = await probe(() => admin.describeGroups([groupId]))
    out.deleteGroups = await probe(() => admin.deleteGroups([groupId])) // must be refused

    await members.b.disconnect() // commits what it consumed, then LeaveGroup
    delete members.b
    await waitFor('"a" owning every partition', () => lastJoin('a').length === partitions)
    await produce(count)
    await waitFor(`${2 * count} records`, () => out.consumed.length >= 2 * count)
    await members.a.disconnect()
    delete members.a

    out.committed = await admin.fetchOffsets({ groupId, topics: [topic] })
  } catch (e) {
    out.error = describeError(e)
  } finally {
    for (const consumer of Object.values(members)) await consumer.disconnect().catch(() => {})
    await producer.disconnect().catch(() => {})
    await admin.disconnect().catch(() => {})
  }
  process.stdout.write(JSON.stringify(out) + '\n')
}

main()
