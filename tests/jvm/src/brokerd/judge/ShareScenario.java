package brokerd.judge;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * share TOPIC GROUP COUNT: Kafka's KafkaShareConsumer in a share group (KIP-932). Sets the
 * group's share.auto.offset.reset to earliest, produces COUNT records to partition 0, then
 * consumes them with explicit acknowledgement: offsets 3n+1 are RELEASEd on their first
 * delivery (they must come back with delivery count 2, then are accepted), offsets 3n+2
 * REJECTed (never again), the others ACCEPTed. Answers every delivery (offset and count).
 */
final class ShareScenario {
    private static final long WAIT_S = 30;

    private ShareScenario() {
    }

    /** share_features: the finalized and supported features Admin.describeFeatures reports. */
    static Object features(String bootstrap) throws Exception {
        Properties common = new Properties();
        common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(common)) {
            FeatureMetadata meta = admin.describeFeatures().featureMetadata().get(WAIT_S, TimeUnit.SECONDS);
            Map<String, Object> finalized = new TreeMap<>();
            meta.finalizedFeatures().forEach((k, v) -> finalized.put(k, List.of((int) v.minVersionLevel(), (int) v.maxVersionLevel())));
            Map<String, Object> supported = new TreeMap<>();
            meta.supportedFeatures().forEach((k, v) -> supported.put(k, List.of((int) v.minVersion(), (int) v.maxVersion())));
            return Json.obj("finalized", finalized, "supported", supported,
                "epoch", meta.finalizedFeaturesEpoch().orElse(-1L));
        }
    }

    static Object run(String bootstrap, String[] args) throws Exception {
        String topic = args[0];
        String group = args[1];
        int count = Integer.parseInt(args[2]);
        Properties common = new Properties();
        common.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        common.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "15000");
        try (Admin admin = Admin.create(common)) {
            ConfigResource resource = new ConfigResource(ConfigResource.Type.GROUP, group);
            AlterConfigOp op = new AlterConfigOp(
                new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(resource, List.of(op))).all().get(WAIT_S, TimeUnit.SECONDS);
        }
        Properties pp = new Properties();
        pp.putAll(common);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> p = new KafkaProducer<>(pp)) {
            for (int i = 0; i < count; i++) {
                p.send(new ProducerRecord<>(topic, 0, "k" + i, "v" + i));
            }
            p.flush();
        }
        Properties cp = new Properties();
        cp.putAll(common);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put("share.acknowledgement.mode", "explicit");
        List<Object> deliveries = new ArrayList<>();
        Map<Long, Boolean> done = new HashMap<>();
        try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(cp)) {
            c.subscribe(List.of(topic));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
            while (done.size() < count && System.nanoTime() < deadline) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    int delivery = r.deliveryCount().map(Short::intValue).orElse(-1);
                    deliveries.add(Json.obj("offset", r.offset(), "delivery_count", delivery,
                        "value", r.value()));
                    AcknowledgeType type = AcknowledgeType.ACCEPT;
                    if (r.offset() % 3 == 1 && delivery == 1) {
                        type = AcknowledgeType.RELEASE;
                    } else if (r.offset() % 3 == 2) {
                        type = AcknowledgeType.REJECT;
                    }
                    c.acknowledge(r, type);
                    if (type != AcknowledgeType.RELEASE) {
                        done.put(r.offset(), true);
                    }
                }
                c.commitSync(Duration.ofSeconds(WAIT_S));
            }
            // Nothing more may come: rejected and accepted records are done for good.
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(1500))) {
                deliveries.add(Json.obj("offset", r.offset(), "delivery_count",
                    r.deliveryCount().map(Short::intValue).orElse(-1), "value", r.value()));
                c.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            c.commitSync(Duration.ofSeconds(WAIT_S));
        }
        return Json.obj("deliveries", deliveries);
    }
}
