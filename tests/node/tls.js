// kafkajs over TLS: produce records to a topic, then consume them; prints JSON.
//
//   node tls.js BOOTSTRAP CA_FILE TOPIC COUNT [CERT_FILE KEY_FILE]
//
// Connects with ssl: {ca} (the broker's certificate is verified, host name included),
// and with a client certificate when CERT_FILE and KEY_FILE are given. Creates TOPIC (one
// partition), produces COUNT records "tls-<i>", consumes from the beginning until it has
// COUNT records. The last line of stdout is one JSON object:
//   consumed: [[offset, value], ...]
//   error:    {name, message} if a step failed (then consumed is what got that far)
// tests/net/test_tls_broker.py asserts on it.
'use strict'

const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const STEP_TIMEOUT_MS = 30000

async function main() {
  const [bootstrap, caFile, topic, countArg, certFile, keyFile] = process.argv.slice(2)
  const count = Number(countArg)
  const ssl = { ca: [fs.readFileSync(caFile, 'utf8')] }
  if (certFile) {
    ssl.cert = fs.readFileSync(certFile, 'utf8')
    ssl.key = fs.readFileSync(keyFile, 'utf8')
  }
  const kafka = new Kafka({
    clientId: 'brokerd-kafkajs-tls',
    brokers: [bootstrap],
    ssl,
    connectionTimeout: 5000,
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000 },
    logLevel: logLevel.NOTHING,
  })
  const result = { consumed: [] }
  const admin = kafka.admin()
  const producer = kafka.producer()
  const consumer = kafka.consumer({ groupId: `${topic}-group` })
  try {
    await admin.connect()
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }] })
    await producer.connect()
    const messages = []
    for (let i = 0; i < count; i++) messages.push({ value: `tls-${i}` })
    await producer.send({ topic, messages })
    await consumer.connect()
    await consumer.subscribe({ topic, fromBeginning: true })
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('timed out consuming')), STEP_TIMEOUT_MS)
      consumer.run({
        eachMessage: async ({ message }) => {
          result.consumed.push([Number(message.offset), message.value.toString()])
          if (result.consumed.length >= count) {
            clearTimeout(timer)
            resolve()
          }
        },
      }).catch(reject)
    })
  } catch (e) {
    result.error = { name: e && e.name, message: String(e && e.message) }
  } finally {
    for (const client of [consumer, producer, admin]) {
      try { await client.disconnect() } catch (e) { /* already failed above */ }
    }
  }
  console.log(JSON.stringify(result))
}

main().catch(e => {
  console.log(JSON.stringify({ fatal: String(e && e.stack) }))
  process.exit(1)
})
