package brokerd.judge;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.springframework.cloud.stream.schema.registry.SchemaReference;
import org.springframework.cloud.stream.schema.registry.SchemaRegistrationResponse;
import org.springframework.cloud.stream.schema.registry.client.ConfluentSchemaRegistryClient;
import org.springframework.web.client.HttpStatusCodeException;

/**
 * registry URL SUBJECT_PREFIX TOPIC: Spring Cloud Stream's ConfluentSchemaRegistryClient (a
 * client of Confluent's Schema Registry API from Maven Central) registers an Avro schema
 * under SUBJECT_PREFIX-value, registers it again, fetches it by id and by subject and
 * version; Apache Avro encodes a record framed as Confluent's serializers frame it (a zero
 * byte, the id as four big-endian bytes, the Avro binary); Kafka's Java client produces it
 * to TOPIC partition 0 and reads it back, and a second registry client fetches the writer's
 * schema by the id in the record to decode it. Then a compatible second version and an
 * incompatible third: the registry's refusal is answered as status and body.
 */
final class RegistryScenario {
    private static final long WAIT_S = 30;

    static final String USER_V1 = "{\"type\":\"record\",\"name\":\"User\",\"namespace\":\"brokerd.judge\","
        + "\"fields\":[{\"name\":\"name\",\"type\":\"string\"}]}";
    /** A new field with a default: readers of v2 read v1 data (BACKWARD). */
    static final String USER_V2 = "{\"type\":\"record\",\"name\":\"User\",\"namespace\":\"brokerd.judge\","
        + "\"fields\":[{\"name\":\"name\",\"type\":\"string\"},{\"name\":\"age\",\"type\":\"int\",\"default\":0}]}";
    /** A new field without a default: v3 readers cannot read v1 data. */
    static final String USER_V3 = "{\"type\":\"record\",\"name\":\"User\",\"namespace\":\"brokerd.judge\","
        + "\"fields\":[{\"name\":\"name\",\"type\":\"string\"},{\"name\":\"email\",\"type\":\"string\"}]}";

    private RegistryScenario() {
    }

    private static ConfluentSchemaRegistryClient client(String url) {
        ConfluentSchemaRegistryClient client = new ConfluentSchemaRegistryClient();
        client.setEndpoint(url);
        return client;
    }

    /** The id of a registration, or the registry's refusal (the client wraps it). */
    private static Object attempt(String url, String subject, String schema) {
        try {
            return Json.obj("id", client(url).register(subject, "avro", schema).getId());
        } catch (RuntimeException e) {
            for (Throwable t = e; t != null; t = t.getCause()) {
                if (t instanceof HttpStatusCodeException http) {
                    return Json.obj("status", http.getStatusCode().value(), "body", http.getResponseBodyAsString());
                }
            }
            throw e;
        }
    }

    static Object run(String bootstrap, String[] args) throws Exception {
        String url = args[0];
        String subject = args[1] + "-value";
        String topic = args[2];
        ConfluentSchemaRegistryClient writer = client(url);
        SchemaRegistrationResponse first = writer.register(subject, "avro", USER_V1);
        SchemaRegistrationResponse again = writer.register(subject, "avro", USER_V1);
        SchemaReference ref = first.getSchemaReference();
        String byId = writer.fetch(first.getId());
        String byVersion = writer.fetch(new SchemaReference(subject, ref.getVersion(), "avro"));

        Schema schema = new Schema.Parser().parse(byId);
        GenericRecord user = new GenericData.Record(schema);
        user.put("name", "ada");
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        bytes.write(0);
        bytes.write(ByteBuffer.allocate(4).putInt(first.getId()).array());
        BinaryEncoder encoder = EncoderFactory.get().binaryEncoder(bytes, null);
        new GenericDatumWriter<GenericRecord>(schema).write(user, encoder);
        encoder.flush();
        byte[] framed = bytes.toByteArray();

        Properties common = new Properties();
        common.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        Properties pp = new Properties();
        pp.putAll(common);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "25000");
        pp.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
        long offset;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp)) {
            offset = producer.send(new ProducerRecord<>(topic, 0, null, framed)).get(WAIT_S, TimeUnit.SECONDS).offset();
        }

        Properties cp = new Properties();
        cp.putAll(common);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        cp.put(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, "100");
        List<Object> read = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            consumer.assign(List.of(tp));
            consumer.seek(tp, offset);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
            while (read.isEmpty() && System.nanoTime() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    ByteBuffer value = ByteBuffer.wrap(r.value());
                    byte magic = value.get();
                    int id = value.getInt();
                    // A reader with nothing cached: the schema comes from the registry by id.
                    Schema writerSchema = new Schema.Parser().parse(client(url).fetch(id));
                    GenericRecord decoded = new GenericDatumReader<GenericRecord>(writerSchema).read(null,
                        DecoderFactory.get().binaryDecoder(r.value(), 5, r.value().length - 5, null));
                    read.add(Json.obj("offset", r.offset(), "magic", (int) magic, "id", id,
                        "name", String.valueOf(decoded.get("name"))));
                }
            }
        }

        Object v3 = attempt(url, subject, USER_V3);
        Object v2 = attempt(url, subject, USER_V2);
        Object missing;
        try {
            missing = Json.obj("schema", writer.fetch(1 << 30));
        } catch (RuntimeException e) {
            missing = Json.obj("error", e.getClass().getSimpleName());
        }
        return Json.obj(
            "id", first.getId(), "version", ref.getVersion(), "subject", ref.getSubject(),
            "again", again.getId(), "by_id", byId, "by_version", byVersion,
            "framed_length", framed.length, "read", read,
            "v3", v3, "v2", v2, "missing_id", missing,
            "fields_v1", fieldNames(schema));
    }

    private static List<String> fieldNames(Schema schema) {
        List<String> names = new ArrayList<>();
        for (Schema.Field f : schema.getFields()) {
            names.add(f.name());
        }
        return names;
    }
}
