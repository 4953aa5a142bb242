package main

// IBM/sarama with Config.Version set to Kafka 4.2.1, as a user of Kafka 4.2 would set it:
// sarama picks each request's version from that setting, not from ApiVersions.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

var saramaScenarios = map[string]scenario{
	"create":         saramaCreate,
	"describe_topic": saramaDescribeTopic,
	"alter_config":   saramaAlterConfig,
	"produce":        saramaProduce,
	"consume":        saramaConsume,
	"group":          saramaGroup,
	"list_offsets":   saramaListOffsets,
	"txn":            saramaTxn,
}

func saramaConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V4_2_1_0
	c.Net.DialTimeout = 5 * time.Second
	c.Admin.Timeout = wait
	c.Metadata.Retry.Max = 3
	c.Producer.Return.Successes = true
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Partitioner = sarama.NewManualPartitioner
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.MaxWaitTime = 100 * time.Millisecond
	return c
}

func saramaAdmin(bootstrap string) (sarama.ClusterAdmin, error) {
	return sarama.NewClusterAdmin([]string{bootstrap}, saramaConfig())
}

func saramaConfigs(adm sarama.ClusterAdmin, topic string, names []string) (map[string]any, error) {
	entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	for _, name := range names {
		out[name] = nil
		for _, e := range entries {
			if e.Name == name {
				out[name] = map[string]any{"value": e.Value, "source": e.Source.String()}
			}
		}
	}
	return out, nil
}

func saramaCreate(bootstrap string, args []string) (any, error) {
	adm, err := saramaAdmin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	configs := pairs(args[2:])
	entries := map[string]*string{}
	for k, v := range configs {
		entries[k] = &v
	}
	detail := &sarama.TopicDetail{NumPartitions: int32(atoi(args[1])), ReplicationFactor: 1, ConfigEntries: entries}
	if err := adm.CreateTopic(args[0], detail, false); err != nil {
		return nil, err
	}
	read, err := saramaConfigs(adm, args[0], sortedKeys(configs))
	if err != nil {
		return nil, err
	}
	return map[string]any{"configs": read}, nil
}

func saramaDescribeTopic(bootstrap string, args []string) (any, error) {
	adm, err := saramaAdmin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	mds, err := adm.DescribeTopics([]string{args[0]})
	if err != nil {
		return nil, err
	}
	if len(mds) != 1 {
		return nil, fmt.Errorf("%d topics described", len(mds))
	}
	if !errors.Is(mds[0].Err, sarama.ErrNoError) {
		return nil, mds[0].Err
	}
	parts := []int32{}
	for _, p := range mds[0].Partitions {
		parts = append(parts, p.ID)
	}
	id := mds[0].Uuid.String()
	if mds[0].Uuid == (sarama.Uuid{}) {
		id = ""
	}
	brokers, controller, err := adm.DescribeCluster()
	if err != nil {
		return nil, err
	}
	ids := []int32{}
	for _, b := range brokers {
		ids = append(ids, b.ID())
	}
	return map[string]any{"topic_id": id, "partitions": parts, "brokers": ids, "controller": controller}, nil
}

func saramaAlterConfig(bootstrap string, args []string) (any, error) {
	adm, err := saramaAdmin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	configs := pairs(args[1:])
	entries := map[string]sarama.IncrementalAlterConfigsEntry{}
	for k, v := range configs {
		entries[k] = sarama.IncrementalAlterConfigsEntry{Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &v}
	}
	if err := adm.IncrementalAlterConfig(sarama.TopicResource, args[0], entries, false); err != nil {
		return nil, err
	}
	read, err := saramaConfigs(adm, args[0], sortedKeys(configs))
	if err != nil {
		return nil, err
	}
	return map[string]any{"configs": read}, nil
}

func saramaProduce(bootstrap string, args []string) (any, error) {
	c := saramaConfig()
	if len(args) > 4 && args[4] == "idempotent" {
		c.Producer.Idempotent = true
		c.Net.MaxOpenRequests = 1
	}
	p, err := sarama.NewSyncProducer([]string{bootstrap}, c)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	var msgs []*sarama.ProducerMessage
	for i := 0; i < atoi(args[2]); i++ {
		msgs = append(msgs, &sarama.ProducerMessage{
			Topic: args[0], Partition: int32(atoi(args[1])),
			Key:   sarama.StringEncoder(fmt.Sprintf("%s-k%d", args[3], i)),
			Value: sarama.StringEncoder(fmt.Sprintf("%s-v%d", args[3], i)),
		})
	}
	if err := p.SendMessages(msgs); err != nil {
		return nil, err
	}
	offsets := []int64{}
	for _, m := range msgs {
		offsets = append(offsets, m.Offset)
	}
	return map[string]any{"offsets": offsets}, nil
}

func saramaConsume(bootstrap string, args []string) (any, error) {
	c := saramaConfig()
	if len(args) > 3 && args[3] == "read_committed" {
		c.Consumer.IsolationLevel = sarama.ReadCommitted
	}
	consumer, err := sarama.NewConsumer([]string{bootstrap}, c)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(args[0], int32(atoi(args[1])), sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	defer pc.Close()
	got := []record{}
	timeout := time.After(wait)
	for len(got) < atoi(args[2]) {
		select {
		case m := <-pc.Messages():
			got = append(got, rec(m.Partition, m.Offset, m.Key, m.Value))
		case e := <-pc.Errors():
			return nil, e
		case <-timeout:
			return nil, fmt.Errorf("read %d of %s records", len(got), args[2])
		}
	}
	return map[string]any{"records": got}, nil
}

// saramaMember collects what its claims deliver and marks each message.
type saramaMember struct {
	mu   sync.Mutex
	got  []record
	want int
	done chan struct{}
	once sync.Once
}

func (m *saramaMember) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (m *saramaMember) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (m *saramaMember) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for msg := range claim.Messages() {
		m.mu.Lock()
		m.got = append(m.got, rec(msg.Partition, msg.Offset, msg.Key, msg.Value))
		enough := len(m.got) >= m.want
		m.mu.Unlock()
		s.MarkMessage(msg, "")
		if enough {
			s.Commit()
			m.once.Do(func() { close(m.done) })
		}
	}
	return nil
}

func saramaGroup(bootstrap string, args []string) (any, error) {
	c := saramaConfig()
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.Group.Session.Timeout = 6 * time.Second
	c.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	group, err := sarama.NewConsumerGroup([]string{bootstrap}, args[1], c)
	if err != nil {
		return nil, err
	}
	member := &saramaMember{want: atoi(args[2]), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	failed := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{args[0]}, member); err != nil {
				failed <- err
				return
			}
		}
	}()
	select {
	case <-member.done:
	case err := <-failed:
		group.Close()
		return nil, err
	case <-ctx.Done():
		group.Close()
		return nil, fmt.Errorf("read %d of %s records", len(member.got), args[2])
	}
	cancel()
	if err := group.Close(); err != nil {
		return nil, err
	}
	adm, err := saramaAdmin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	fetched, err := adm.ListConsumerGroupOffsets(args[1], nil)
	if err != nil {
		return nil, err
	}
	committed := map[string]int64{}
	for p, block := range fetched.Blocks[args[0]] {
		committed[fmt.Sprint(p)] = block.Offset
	}
	described, err := adm.DescribeConsumerGroups([]string{args[1]})
	if err != nil {
		return nil, err
	}
	member.mu.Lock()
	defer member.mu.Unlock()
	return map[string]any{"records": member.got, "committed": committed, "state": described[0].State}, nil
}

func saramaListOffsets(bootstrap string, args []string) (any, error) {
	client, err := sarama.NewClient([]string{bootstrap}, saramaConfig())
	if err != nil {
		return nil, err
	}
	defer client.Close()
	p := int32(atoi(args[1]))
	earliest, err := client.GetOffset(args[0], p, sarama.OffsetOldest)
	if err != nil {
		return nil, err
	}
	latest, err := client.GetOffset(args[0], p, sarama.OffsetNewest)
	if err != nil {
		return nil, err
	}
	return map[string]any{"earliest": earliest, "latest": latest}, nil
}

// txn TOPIC TXID PREFIX COMMITTED ABORTED: one committed transaction, then one aborted.
func saramaTxn(bootstrap string, args []string) (any, error) {
	c := saramaConfig()
	c.Producer.Idempotent = true
	c.Producer.Transaction.ID = args[1]
	c.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer([]string{bootstrap}, c)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	for round, what := range []string{"committed", "aborted"} {
		if err := p.BeginTxn(); err != nil {
			return nil, err
		}
		var msgs []*sarama.ProducerMessage
		for i := 0; i < atoi(args[3+round]); i++ {
			msgs = append(msgs, &sarama.ProducerMessage{
				Topic: args[0], Partition: 0,
				Key:   sarama.StringEncoder(fmt.Sprintf("%s-k%d", args[2], i)),
				Value: sarama.StringEncoder(fmt.Sprintf("%s-%s%d", args[2], what, i)),
			})
		}
		if err := p.SendMessages(msgs); err != nil {
			return nil, err
		}
		end := p.CommitTxn
		if round == 1 {
			end = p.AbortTxn
		}
		if err := end(); err != nil {
			return nil, err
		}
	}
	return map[string]any{"done": true}, nil
}
