package brokerd.streams;

import java.time.Duration;
import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.StateRestoreListener;

/**
 * The Kafka Streams application of tests/e2e/test_kafka_streams.py, run as its own process.
 *
 * <p>Arguments: bootstrap servers, application id, processing guarantee
 * ({@code at_least_once} or {@code exactly_once_v2}), state directory, topic prefix and,
 * optionally, the group protocol ({@code classic}, the default, or {@code streams}: KIP-1071,
 * the broker assigns the tasks and creates the internal topics).
 * Inputs: {@code <prefix>lines} (lines of words) and {@code <prefix>categories} (word to
 * category, read as a table). Outputs, every value a decimal count:
 * {@code <prefix>word-counts} (word), {@code <prefix>window-counts} ("word@windowStartMs",
 * 10 s tumbling windows of event time) and {@code <prefix>category-counts} (the words joined
 * with their category, counted per category).
 *
 * <p>It prints one line per event on stdout for the test to wait on: {@code STATE <new>}
 * and {@code RESTORED <store> <partition> <records>} when a store finishes restoring from its
 * changelog. It reads {@code add-thread} and {@code remove-thread} on stdin (answered
 * {@code THREAD-ADDED <name>} and {@code THREAD-REMOVED <name>}).
 */
public final class Topology {
    static final long WINDOW_MS = 10_000;

    private Topology() {}

    public static void main(String[] args) throws InterruptedException {
        if (args.length != 5 && args.length != 6) {
            System.err.println("usage: Topology BOOTSTRAP APP_ID GUARANTEE STATE_DIR PREFIX [PROTOCOL]");
            System.exit(2);
        }
        String prefix = args[4];
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[2]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[3]);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        // Small commits make a kill land between commits with records in flight, which is
        // the case the guarantees are about; no cache, so every update reaches the output.
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        String protocol = args.length == 6 ? args[5] : "classic";
        if (protocol.equals("streams")) {
            // The session and heartbeat times of a streams group are the group's configs
            // (streams.session.timeout.ms), set by the test, not the client's.
            props.put("group.protocol", "streams");
        } else {
            // A killed instance leaves its member in the group until the session times
            // out; the broker's minimum keeps the restart's rebalance to seconds.
            props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
            props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        }

        StreamsBuilder builder = new StreamsBuilder();
        KStream<String, String> words = builder
            .stream(prefix + "lines", Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\s+")))
            .filter((key, word) -> !word.isEmpty())
            .selectKey((key, word) -> word);

        // Word count: grouping by the new key goes through a repartition topic; the count
        // lives in a RocksDB store with its changelog.
        KTable<String, Long> counts = words
            .groupByKey(Grouped.with("by-word", Serdes.String(), Serdes.String()))
            .count(Materialized.as("word-counts"));
        counts.toStream()
            .mapValues(String::valueOf)
            .to(prefix + "word-counts", Produced.with(Serdes.String(), Serdes.String()));

        // Windowed count of the same words by event time. The grace is long, so records that
        // come late (two input partitions interleave in the repartition topic) still count.
        words
            .groupByKey(Grouped.with("by-word-windowed", Serdes.String(), Serdes.String()))
            .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(WINDOW_MS), Duration.ofDays(1)))
            .count(Materialized.as("window-counts"))
            .toStream()
            .map((window, count) -> KeyValue.pair(
                window.key() + "@" + window.window().start(), String.valueOf(count)))
            .to(prefix + "window-counts", Produced.with(Serdes.String(), Serdes.String()));

        // Stream-table join: each word looks up its category, then counts per category.
        KTable<String, String> categories = builder.table(
            prefix + "categories", Consumed.with(Serdes.String(), Serdes.String()),
            Materialized.as("categories"));
        words
            .repartition(org.apache.kafka.streams.kstream.Repartitioned.as("to-join"))
            .join(categories, (word, category) -> category)
            .groupBy((word, category) -> category, Grouped.with("by-category", Serdes.String(), Serdes.String()))
            .count(Materialized.as("category-counts"))
            .toStream()
            .mapValues(String::valueOf)
            .to(prefix + "category-counts", Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            say("STATE " + now);
            if (now == KafkaStreams.State.NOT_RUNNING || now == KafkaStreams.State.ERROR) {
                done.countDown();
            }
        });
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition tp, String store, long start, long end) {}

            @Override
            public void onBatchRestored(TopicPartition tp, String store, long end, long n) {}

            @Override
            public void onRestoreEnd(TopicPartition tp, String store, long total) {
                say("RESTORED " + store + " " + tp.partition() + " " + total);
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            StringBuilder why = new StringBuilder(String.valueOf(e));
            for (Throwable c = e.getCause(); c != null; c = c.getCause()) {
                why.append(" <- ").append(c);
            }
            e.printStackTrace();
            say("FAILED " + why);
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close(Duration.ofSeconds(20));
            done.countDown();
        }));
        streams.start();
        // Scaling without a second JVM: "add-thread" / "remove-thread" on stdin add or
        // remove a stream thread, each thread being a member of the group of its own.
        Thread commands = new Thread(() -> {
            try (java.io.BufferedReader in = new java.io.BufferedReader(
                    new java.io.InputStreamReader(System.in, java.nio.charset.StandardCharsets.UTF_8))) {
                for (String line = in.readLine(); line != null; line = in.readLine()) {
                    if (line.equals("add-thread")) {
                        say("THREAD-ADDED " + streams.addStreamThread().orElse("none"));
                    } else if (line.equals("remove-thread")) {
                        say("THREAD-REMOVED "
                            + streams.removeStreamThread(Duration.ofSeconds(60)).orElse("none"));
                    }
                }
            } catch (java.io.IOException e) {
                say("FAILED stdin " + e);
            }
        }, "commands");
        commands.setDaemon(true);
        commands.start();
        done.await();
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
