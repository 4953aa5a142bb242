// Runs @kafkajs/confluent-schema-registry against one schema registry and prints what it
// saw as one line of JSON: {"ok": {...}} or {"error": {...}}.
//
//   node schema_registry.js REGISTRY_URL SUBJECT_PREFIX
//
// For each of Avro, JSON Schema and Protobuf: register a schema under PREFIX-<kind>-value,
// register it again (the same id must come back), encode a value with the registry's id,
// decode it with a fresh client (which must fetch the schema by id), then register a
// compatible second version and try an incompatible third; then an Avro schema with a
// reference to another subject's, registered, encoded and decoded. The client's errors are
// reported as it raised them (class name and message). Nothing here knows what the test
// expects: tests/e2e/test_platform_judges.py asserts.
'use strict'

const {
  SchemaRegistry,
  SchemaType,
} = require('@kafkajs/confluent-schema-registry')

function describeError(e) {
  if (e === null || typeof e !== 'object') return { name: 'thrown', message: String(e) }
  return { name: e.name, message: e.message, status: e.status }
}

const KINDS = {
  avro: {
    type: SchemaType.AVRO,
    v1: {
      type: 'record', name: 'User', namespace: 'brokerd.judge',
      fields: [{ name: 'name', type: 'string' }],
    },
    // A new field with a default: readers of v2 can read v1 data (BACKWARD).
    v2: {
      type: 'record', name: 'User', namespace: 'brokerd.judge',
      fields: [{ name: 'name', type: 'string' }, { name: 'age', type: 'int', default: 0 }],
    },
    // A new field without a default: v3 readers cannot read v1 data.
    v3: {
      type: 'record', name: 'User', namespace: 'brokerd.judge',
      fields: [{ name: 'name', type: 'string' }, { name: 'email', type: 'string' }],
    },
    value: { name: 'ada' },
    text: s => JSON.stringify(s),
  },
  json: {
    type: SchemaType.JSON,
    // A closed content model: v1 data holds no property but name.
    v1: {
      type: 'object',
      properties: { name: { type: 'string' } },
      required: ['name'],
      additionalProperties: false,
    },
    // An optional property added to a closed model: v2 reads all v1 data (BACKWARD). In
    // an open model it would not be: v1 data may hold an age of any type.
    v2: {
      type: 'object',
      properties: { name: { type: 'string' }, age: { type: 'integer' } },
      required: ['name'],
      additionalProperties: false,
    },
    // name changes type: data written with v1 is invalid under v3.
    v3: {
      type: 'object',
      properties: { name: { type: 'integer' } },
      required: ['name'],
      additionalProperties: false,
    },
    value: { name: 'ada' },
    text: s => JSON.stringify(s),
  },
  protobuf: {
    type: SchemaType.PROTOBUF,
    v1: 'syntax = "proto3";\npackage brokerd.judge;\n\nmessage User {\n  string name = 1;\n}\n',
    v2: 'syntax = "proto3";\npackage brokerd.judge;\n\nmessage User {\n  string name = 1;\n  int32 age = 2;\n}\n',
    // Field 1 changes from a string to an int64 (wire types differ): incompatible.
    v3: 'syntax = "proto3";\npackage brokerd.judge;\n\nmessage User {\n  int64 name = 1;\n}\n',
    value: { name: 'ada' },
    text: s => s,
  },
}

async function attempt(fn) {
  try {
    return { ok: await fn() }
  } catch (e) {
    return { error: describeError(e) }
  }
}

async function judge(url, prefix, kind, spec) {
  const subject = `${prefix}-${kind}-value`
  const writer = new SchemaRegistry({ host: url, retry: { retries: 0 } })
  const schema = v => ({ type: spec.type, schema: spec.text(spec[v]) })
  const out = { subject }
  const first = await writer.register(schema('v1'), { subject })
  out.id = first.id
  out.again = (await writer.register(schema('v1'), { subject })).id
  out.latest = await writer.getLatestSchemaId(subject)
  out.byVersion = await writer.getRegistryId(subject, 1)
  out.bySchema = await writer.getRegistryIdBySchema(subject, schema('v1'))
  const encoded = await writer.encode(first.id, spec.value)
  out.encoded = encoded.toString('hex')
  // A second client has nothing cached: decode must fetch the schema by id.
  const reader = new SchemaRegistry({ host: url, retry: { retries: 0 } })
  const decoded = await reader.decode(encoded)
  out.decoded = JSON.parse(JSON.stringify(decoded))
  out.v2 = await attempt(async () => (await writer.register(schema('v2'), { subject })).id)
  out.v3 = await attempt(async () => (await writer.register(schema('v3'), { subject })).id)
  out.latestAfter = await writer.getLatestSchemaId(subject)
  return out
}

// An Avro schema that names a type registered under another subject (a schema
// reference): the client resolves the reference through the registry when it registers
// and when a fresh client decodes.
async function references(url, prefix) {
  const addressSubject = `${prefix}-address`
  const subject = `${prefix}-customer-value`
  const writer = new SchemaRegistry({ host: url, retry: { retries: 0 } })
  const address = {
    type: 'record', name: 'Address', namespace: 'brokerd.judge',
    fields: [{ name: 'city', type: 'string' }],
  }
  const customer = {
    type: 'record', name: 'Customer', namespace: 'brokerd.judge',
    fields: [{ name: 'name', type: 'string' }, { name: 'address', type: 'brokerd.judge.Address' }],
  }
  const base = await writer.register(
    { type: SchemaType.AVRO, schema: JSON.stringify(address) }, { subject: addressSubject })
  const reference = { name: 'brokerd.judge.Address', subject: addressSubject, version: 1 }
  const top = await writer.register(
    { type: SchemaType.AVRO, schema: JSON.stringify(customer), references: [reference] },
    { subject })
  const value = { name: 'ada', address: { city: 'London' } }
  const encoded = await writer.encode(top.id, value)
  const reader = new SchemaRegistry({ host: url, retry: { retries: 0 } })
  const decoded = JSON.parse(JSON.stringify(await reader.decode(encoded)))
  return { subject, addressId: base.id, id: top.id, reference, encoded: encoded.toString('hex'), decoded }
}

async function main() {
  const [url, prefix] = process.argv.slice(2)
  const result = {}
  for (const [kind, spec] of Object.entries(KINDS)) {
    try {
      result[kind] = await judge(url, prefix, kind, spec)
    } catch (e) {
      result[kind] = { error: describeError(e) }
    }
  }
  try {
    result.references = await references(url, prefix)
  } catch (e) {
    result.references = { error: describeError(e) }
  }
  process.stdout.write(JSON.stringify({ ok: result }) + '\n')
}

main().catch(e => {
  process.stdout.write(JSON.stringify({ error: describeError(e) }) + '\n')
  process.exitCode = 1
})
