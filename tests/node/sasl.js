// Logs in to one broker with kafkajs over SASL/SCRAM, produces one record and reads it
// back, then prints the outcome as JSON on the last line of stdout.
//
//   node sasl.js BOOTSTRAP MECHANISM USER PASSWORD
//
// MECHANISM is kafkajs' name (scram-sha-256, scram-sha-512). Prints
// {"ok": true, "value": <the value read>} or {"ok": false, "error": <error name>,
// "message": ...}. Nothing here knows what the test expects: tests/kafka/server/test_sasl_clients.py
// asserts.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

async function main() {
  const [bootstrap, mechanism, username, password] = process.argv.slice(2)
  const topic = `kafkajs-sasl-${mechanism}`
  const kafka = new Kafka({
    clientId: 'sasl-test',
    brokers: [bootstrap],
    sasl: { mechanism, username, password },
    logLevel: logLevel.NOTHING,
    retry: { retries: 0 },
    connectionTimeout: 10000,
    authenticationTimeout: 10000,
  })
  const producer = kafka.producer()
  await producer.connect()
  await producer.send({ topic, messages: [{ value: 'kafkajs-value' }] })
  await producer.disconnect()
  const consumer = kafka.consumer({ groupId: `g-${topic}` })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const value = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('no record within 30 s')), 30000)
    consumer.run({
      eachMessage: async ({ message }) => {
        clearTimeout(timer)
        resolve(message.value.toString())
      },
    }).catch(reject)
  })
  await consumer.disconnect()
  return value
}

main().then(
  value => { console.log(JSON.stringify({ ok: true, value })); process.exit(0) },
  e => {
    console.log(JSON.stringify({ ok: false, error: e.name, message: e.message }))
    process.exit(0)
  },
)
