// @platformatic/kafka, unmodified, for tests/test_judges.py: one scenario per run.
// Usage: node platformatic.mjs SCENARIO BOOTSTRAP [ARGS...]; prints one line of JSON,
// {"ok": ...} or {"error": "..."} with the client's own message and those of its causes.
// The assertions live in the Python suite.
import { Admin, Consumer, Producer, stringDeserializers, stringSerializers } from '@platformatic/kafka'

const WAIT_MS = 30000
const [scenario, bootstrap, ...args] = process.argv.slice(2)
const base = { clientId: 'brokerd-judge', bootstrapBrokers: [bootstrap], timeout: 15000, retries: 1 }

function pairs (words) {
  return words.map(w => {
    const at = w.indexOf('=')
    return { name: w.slice(0, at), value: w.slice(at + 1) }
  })
}

function describe (e) {
  const parts = [e.message]
  for (const inner of e.errors ?? []) parts.push(describe(inner))
  if (e.cause) parts.push(describe(e.cause))
  return parts.join(' / ')
}

function record (m) {
  return [m.partition, Number(m.offset), m.key ?? '', m.value ?? '']
}

// Read until `count` records came (or the wait ran out), from a stream of messages.
async function take (stream, count, onEach) {
  const got = []
  const timer = setTimeout(() => stream.destroy(new Error(`read ${got.length} of ${count} records`)), WAIT_MS)
  try {
    for await (const m of stream) {
      got.push(record(m))
      if (onEach) await onEach(m)
      if (got.length >= count) break
    }
  } finally {
    clearTimeout(timer)
  }
  return got
}

const scenarios = {
  async create ([topic, partitions, ...configs]) {
    const admin = new Admin(base)
    try {
      const [created] = await admin.createTopics({
        topics: [topic], partitions: Number(partitions), replicas: 1, configs: pairs(configs)
      })
      return { topic_id: created.id, partitions: created.partitions, configs: created.configuration }
    } finally {
      await admin.close()
    }
  },

  async describe_topic ([topic]) {
    const admin = new Admin(base)
    try {
      const md = await admin.metadata({ topics: [topic] })
      const t = md.topics.get(topic)
      return { topic_id: t.id, partitions: t.partitions.map((_, i) => i), brokers: [...md.brokers.keys()] }
    } finally {
      await admin.close()
    }
  },

  async produce ([topic, partition, count, prefix, mode]) {
    const producer = new Producer({ ...base, serializers: stringSerializers, idempotent: mode === 'idempotent' })
    try {
      const messages = []
      for (let i = 0; i < Number(count); i++) {
        messages.push({ topic, partition: Number(partition), key: `${prefix}-k${i}`, value: `${prefix}-v${i}` })
      }
      const result = await producer.send({ messages, acks: -1 })
      const first = Number(result.offsets[0].offset)
      return { offsets: messages.map((_, i) => first + i) }
    } finally {
      await producer.close()
    }
  },

  async consume ([topic, partition, count, isolation]) {
    const consumer = new Consumer({ ...base, groupId: `brokerd-judge-reader-${process.pid}`, deserializers: stringDeserializers })
    try {
      const stream = await consumer.consume({
        topics: [topic], mode: 'earliest', autocommit: false, maxWaitTime: 100,
        isolationLevel: isolation === 'read_committed' ? 1 : 0
      })
      const got = await take(stream, Number(count))
      await stream.close()
      return { records: got.filter(r => r[0] === Number(partition)) }
    } finally {
      await consumer.close(true)
    }
  },

  async group ([topic, group, count]) {
    const consumer = new Consumer({
      ...base, groupId: group, deserializers: stringDeserializers, sessionTimeout: 6000, heartbeatInterval: 500
    })
    try {
      const stream = await consumer.consume({
        topics: [topic], mode: 'committed', fallbackMode: 'earliest', autocommit: false, maxWaitTime: 100
      })
      const got = await take(stream, Number(count), m => m.commit())
      await stream.close()
      // Every partition of the scenario's topic holds records, so those read name them all.
      const partitions = [...new Set(got.map(r => r[0]))].sort((a, b) => a - b)
      const offsets = await consumer.listCommittedOffsets({ topics: [{ topic, partitions }] })
      const committed = {}
      for (const [i, o] of (offsets.get(topic) ?? []).entries()) {
        if (o >= 0n) committed[String(partitions[i])] = Number(o)
      }
      return { records: got, committed }
    } finally {
      await consumer.close(true)
    }
  },

  async list_offsets ([topic, partition]) {
    const consumer = new Consumer({ ...base, groupId: `brokerd-judge-offsets-${process.pid}` })
    try {
      const earliest = await consumer.listOffsets({ topics: [topic], timestamp: -2n })
      const latest = await consumer.listOffsets({ topics: [topic], timestamp: -1n })
      const p = Number(partition)
      return { earliest: Number(earliest.get(topic)[p]), latest: Number(latest.get(topic)[p]) }
    } finally {
      await consumer.close(true)
    }
  }
}

const timer = setTimeout(() => {
  console.log(JSON.stringify({ error: `no answer within ${WAIT_MS} ms` }))
  process.exit(0)
}, WAIT_MS + 5000)
try {
  const run = scenarios[scenario]
  if (!run) throw new Error(`unknown scenario ${scenario}`)
  console.log(JSON.stringify({ ok: await run(args) }))
} catch (e) {
  console.log(JSON.stringify({ error: describe(e) }))
}
clearTimeout(timer)
process.exit(0)
