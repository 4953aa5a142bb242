// Runs kafkajs admin calls against one broker and prints their outcomes as JSON.
//
//   node admin.js BOOTSTRAP STEPS_JSON
//
// STEPS_JSON is an array of {"call": <admin method>, "args": [<positional arguments>]}.
// The steps run in order on one connected admin client; a failing step does not stop the
// ones after it. The last line of stdout is a JSON array with one entry per step:
// {"ok": <what kafkajs returned>} or {"error": {name, type, code, message, retriable,
// errors}} (errors: the per-item errors kafkajs aggregates, same shape). kafkajs' own log
// goes to stderr. Nothing here knows what the test expects: tests/e2e/test_kafkajs.py asserts.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

function describeError(e) {
  if (e === null || typeof e !== 'object') return { name: 'thrown', message: String(e) }
  const out = {
    name: e.name,
    type: e.type,
    code: e.code,
    message: e.message,
    retriable: e.retriable,
  }
  // KafkaJSAggregateError (createTopics), KafkaJSDeleteGroupsError and
  // KafkaJSDeleteTopicRecordsError carry the errors of single items.
  const items = e.errors || e.groups || e.partitions
  if (Array.isArray(items)) {
    out.errors = items.map(item => {
      const inner = item.error || item
      return { ...describeError(inner), item: item.groupId ?? item.partition ?? item.topic }
    })
  }
  if (e.originalError) out.originalError = describeError(e.originalError)
  if (e.cause) out.cause = describeError(e.cause)
  return out
}

// BigInt-free JSON (kafkajs returns strings for offsets; keep everything as it is).
function toJSON(value) {
  return JSON.stringify(value, (_key, v) => (typeof v === 'bigint' ? v.toString() : v))
}

async function main() {
  const [bootstrap, stepsJson] = process.argv.slice(2)
  const steps = JSON.parse(stepsJson)
  const kafka = new Kafka({
    clientId: 'brokerd-kafkajs-admin',
    brokers: [bootstrap],
    connectionTimeout: 3000,
    requestTimeout: 10000,
    // A few quick retries: enough for a retriable answer, short enough that a broker
    // missing an API fails the step in well under a second.
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000 },
    logLevel: logLevel.ERROR,
    logCreator: () => ({ namespace, log }) =>
      process.stderr.write(`${namespace}: ${log.message} ${toJSON(log)}\n`),
  })
  const admin = kafka.admin()
  await admin.connect()
  const outcomes = []
  try {
    for (const step of steps) {
      const method = admin[step.call]
      if (typeof method !== 'function') {
        outcomes.push({ error: { name: 'NoSuchCall', message: step.call } })
        continue
      }
      try {
        const result = await method.apply(admin, step.args || [])
        outcomes.push({ ok: result === undefined ? null : result })
      } catch (e) {
        outcomes.push({ error: describeError(e) })
      }
    }
  } finally {
    await admin.disconnect()
  }
  process.stdout.write(toJSON(outcomes) + '\n')
}

main().catch(e => {
  process.stdout.write(toJSON({ fatal: describeError(e) }) + '\n')
  process.exit(1)
})
