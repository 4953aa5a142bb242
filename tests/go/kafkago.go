package main

// segmentio/kafka-go: its Client for administration and produce (which reports offsets),
// its Reader for consuming, alone and in a group.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

var kafkaGoScenarios = map[string]scenario{
	"create":         kafkaGoCreate,
	"describe_topic": kafkaGoDescribeTopic,
	"alter_config":   kafkaGoAlterConfig,
	"produce":        kafkaGoProduce,
	"consume":        kafkaGoConsume,
	"group":          kafkaGoGroup,
	"list_offsets":   kafkaGoListOffsets,
}

func kafkaGoClient(bootstrap string) *kafka.Client {
	return &kafka.Client{Addr: kafka.TCP(bootstrap), Timeout: wait}
}

func kafkaGoConfigs(ctx context.Context, c *kafka.Client, topic string, names []string) (map[string]any, error) {
	resp, err := c.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{
		Resources: []kafka.DescribeConfigRequestResource{{ResourceType: kafka.ResourceTypeTopic, ResourceName: topic}},
	})
	if err != nil {
		return nil, err
	}
	if len(resp.Resources) != 1 {
		return nil, fmt.Errorf("%d resources described", len(resp.Resources))
	}
	if resp.Resources[0].Error != nil {
		return nil, resp.Resources[0].Error
	}
	out := map[string]any{}
	for _, name := range names {
		out[name] = nil
		for _, e := range resp.Resources[0].ConfigEntries {
			if e.ConfigName == name {
				out[name] = map[string]any{"value": e.ConfigValue, "source": e.ConfigSource}
			}
		}
	}
	return out, nil
}

func kafkaGoCreate(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c := kafkaGoClient(bootstrap)
	configs := pairs(args[2:])
	var entries []kafka.ConfigEntry
	for _, k := range sortedKeys(configs) {
		entries = append(entries, kafka.ConfigEntry{ConfigName: k, ConfigValue: configs[k]})
	}
	resp, err := c.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: args[0], NumPartitions: atoi(args[1]), ReplicationFactor: 1, ConfigEntries: entries,
	}}})
	if err != nil {
		return nil, err
	}
	if err := resp.Errors[args[0]]; err != nil {
		return nil, err
	}
	read, err := kafkaGoConfigs(ctx, c, args[0], sortedKeys(configs))
	if err != nil {
		return nil, err
	}
	return map[string]any{"configs": read}, nil
}

func kafkaGoDescribeTopic(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	resp, err := kafkaGoClient(bootstrap).Metadata(ctx, &kafka.MetadataRequest{Topics: []string{args[0]}})
	if err != nil {
		return nil, err
	}
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("%d topics in Metadata", len(resp.Topics))
	}
	if resp.Topics[0].Error != nil {
		return nil, resp.Topics[0].Error
	}
	parts := []int{}
	for _, p := range resp.Topics[0].Partitions {
		parts = append(parts, p.ID)
	}
	brokers := []int{}
	for _, b := range resp.Brokers {
		brokers = append(brokers, b.ID)
	}
	return map[string]any{"partitions": parts, "brokers": brokers, "cluster_id": resp.ClusterID}, nil
}

func kafkaGoAlterConfig(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c := kafkaGoClient(bootstrap)
	configs := pairs(args[1:])
	var ops []kafka.IncrementalAlterConfigsRequestConfig
	for _, k := range sortedKeys(configs) {
		ops = append(ops, kafka.IncrementalAlterConfigsRequestConfig{Name: k, Value: configs[k], ConfigOperation: kafka.ConfigOperationSet})
	}
	resp, err := c.IncrementalAlterConfigs(ctx, &kafka.IncrementalAlterConfigsRequest{
		Resources: []kafka.IncrementalAlterConfigsRequestResource{{ResourceType: kafka.ResourceTypeTopic, ResourceName: args[0], Configs: ops}},
	})
	if err != nil {
		return nil, err
	}
	for _, r := range resp.Resources {
		if r.Error != nil {
			return nil, r.Error
		}
	}
	read, err := kafkaGoConfigs(ctx, c, args[0], sortedKeys(configs))
	if err != nil {
		return nil, err
	}
	return map[string]any{"configs": read}, nil
}

// produce: one Produce request of COUNT records (kafka-go's Writer reports no offsets).
func kafkaGoProduce(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var recs []kafka.Record
	count := atoi(args[2])
	for i := 0; i < count; i++ {
		recs = append(recs, kafka.Record{
			Key:   kafka.NewBytes([]byte(fmt.Sprintf("%s-k%d", args[3], i))),
			Value: kafka.NewBytes([]byte(fmt.Sprintf("%s-v%d", args[3], i))),
		})
	}
	resp, err := kafkaGoClient(bootstrap).Produce(ctx, &kafka.ProduceRequest{
		Topic: args[0], Partition: atoi(args[1]), RequiredAcks: kafka.RequireAll,
		Records: kafka.NewRecordReader(recs...),
	})
	if err != nil {
		return nil, err
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	offsets := []int64{}
	for i := 0; i < count; i++ {
		offsets = append(offsets, resp.BaseOffset+int64(i))
	}
	return map[string]any{"offsets": offsets}, nil
}

func kafkaGoConsume(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cfg := kafka.ReaderConfig{
		Brokers: []string{bootstrap}, Topic: args[0], Partition: atoi(args[1]),
		MaxWait: 100 * time.Millisecond, MinBytes: 1, MaxBytes: 10 << 20,
	}
	if len(args) > 3 && args[3] == "read_committed" {
		cfg.IsolationLevel = kafka.ReadCommitted
	}
	r := kafka.NewReader(cfg)
	defer r.Close()
	if err := r.SetOffset(kafka.FirstOffset); err != nil {
		return nil, err
	}
	got := []record{}
	for len(got) < atoi(args[2]) {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return nil, fmt.Errorf("read %d of %s records: %w", len(got), args[2], err)
		}
		got = append(got, rec(int32(m.Partition), m.Offset, m.Key, m.Value))
	}
	return map[string]any{"records": got}, nil
}

func kafkaGoGroup(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: []string{bootstrap}, GroupID: args[1], Topic: args[0],
		StartOffset: kafka.FirstOffset, MaxWait: 100 * time.Millisecond, MinBytes: 1, MaxBytes: 10 << 20,
		SessionTimeout: 6 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
	})
	got := []record{}
	for len(got) < atoi(args[2]) {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("read %d of %s records: %w", len(got), args[2], err)
		}
		got = append(got, rec(int32(m.Partition), m.Offset, m.Key, m.Value))
		if err := r.CommitMessages(ctx, m); err != nil {
			r.Close()
			return nil, err
		}
	}
	if err := r.Close(); err != nil {
		return nil, err
	}
	c := kafkaGoClient(bootstrap)
	md, err := c.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{args[0]}})
	if err != nil {
		return nil, err
	}
	parts := []int{}
	for _, p := range md.Topics[0].Partitions {
		parts = append(parts, p.ID)
	}
	fetched, err := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: args[1], Topics: map[string][]int{args[0]: parts}})
	if err != nil {
		return nil, err
	}
	committed := map[string]int64{}
	for _, p := range fetched.Topics[args[0]] {
		if p.Error != nil {
			return nil, p.Error
		}
		if p.CommittedOffset >= 0 {
			committed[fmt.Sprint(p.Partition)] = p.CommittedOffset
		}
	}
	described, err := c.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{args[1]}})
	if err != nil {
		return nil, err
	}
	if len(described.Groups) != 1 {
		return nil, errors.New("group not described")
	}
	return map[string]any{"records": got, "committed": committed, "state": described.Groups[0].GroupState}, nil
}

func kafkaGoListOffsets(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	p := atoi(args[1])
	resp, err := kafkaGoClient(bootstrap).ListOffsets(ctx, &kafka.ListOffsetsRequest{
		Topics: map[string][]kafka.OffsetRequest{args[0]: {kafka.FirstOffsetOf(p), kafka.LastOffsetOf(p)}},
	})
	if err != nil {
		return nil, err
	}
	for _, po := range resp.Topics[args[0]] {
		if po.Partition == p {
			if po.Error != nil {
				return nil, po.Error
			}
			return map[string]any{"earliest": po.FirstOffset, "latest": po.LastOffset}, nil
		}
	}
	return nil, errors.New("partition not listed")
}
