package main

// franz-go: kgo for producing and consuming, kadm for administration. Both negotiate the
// highest version the broker advertises, so they show what brokerd's newest versions mean.

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var franzScenarios = map[string]scenario{
	"create":         franzCreate,
	"describe_topic": franzDescribeTopic,
	"alter_config":   franzAlterConfig,
	"produce":        franzProduce,
	"consume":        franzConsume,
	"group":          franzGroup,
	"group_offsets":  franzGroupOffsets,
	"list_offsets":   franzListOffsets,
	"txn":            franzTxn,
	"delete_records": franzDeleteRecords,
	"acls":           franzACLs,
}

func franzClient(bootstrap string, opts ...kgo.Opt) (*kgo.Client, error) {
	all := append([]kgo.Opt{
		kgo.SeedBrokers(bootstrap),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchMaxWait(100e6),
	}, opts...)
	return kgo.NewClient(all...)
}

func franzAdmin(bootstrap string) (*kadm.Client, *kgo.Client, error) {
	cl, err := franzClient(bootstrap)
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl, nil
}

func franzConfigs(ctx context.Context, adm *kadm.Client, topic string, names []string) (map[string]any, error) {
	described, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, err
	}
	rc, err := described.On(topic, nil)
	if err != nil {
		return nil, err
	}
	if rc.Err != nil {
		return nil, rc.Err
	}
	out := map[string]any{}
	for _, name := range names {
		out[name] = nil
		for _, c := range rc.Configs {
			if c.Key == name {
				out[name] = map[string]any{"value": c.MaybeValue(), "source": c.Source.String()}
			}
		}
	}
	return out, nil
}

// create TOPIC PARTITIONS [name=value...]: the ID CreateTopics answered, the configs read back.
func franzCreate(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	adm, cl, err := franzAdmin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	configs := pairs(args[2:])
	ptrs := map[string]*string{}
	for k, v := range configs {
		ptrs[k] = &v
	}
	created, err := adm.CreateTopic(ctx, int32(atoi(args[1])), 1, ptrs, args[0])
	if err != nil {
		return nil, err
	}
	if created.Err != nil {
		return nil, fmt.Errorf("%w: %s", created.Err, created.ErrMessage)
	}
	read, err := franzConfigs(ctx, adm, args[0], sortedKeys(configs))
	if err != nil {
		return nil, err
	}
	id := created.ID.String()
	if created.ID == (kadm.TopicID{}) {
		id = ""
	}
	return map[string]any{"topic_id": id, "partitions": created.NumPartitions, "configs": read}, nil
}

// describe_topic TOPIC: Metadata at the highest version, its topic ID and partitions.
func franzDescribeTopic(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	adm, cl, err := franzAdmin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	md, err := adm.Metadata(ctx, args[0])
	if err != nil {
		return nil, err
	}
	td, ok := md.Topics[args[0]]
	if !ok {
		return nil, errors.New("topic missing from Metadata")
	}
	if td.Err != nil {
		return nil, td.Err
	}
	id := td.ID.String()
	if td.ID == (kadm.TopicID{}) {
		id = ""
	}
	parts := []int32{}
	for _, p := range td.Partitions.Numbers() {
		parts = append(parts, p)
	}
	brokers := []int32{}
	for _, b := range md.Brokers {
		brokers = append(brokers, b.NodeID)
	}
	return map[string]any{"topic_id": id, "partitions": parts, "brokers": brokers, "cluster_id": md.Cluster}, nil
}

// alter_config TOPIC name=value...: IncrementalAlterConfigs SET, then described.
func franzAlterConfig(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	adm, cl, err := franzAdmin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	configs := pairs(args[1:])
	var alters []kadm.AlterConfig
	for k, v := range configs {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: &v})
	}
	resps, err := adm.AlterTopicConfigs(ctx, alters, args[0])
	if err != nil {
		return nil, err
	}
	for _, r := range resps {
		if r.Err != nil {
			return nil, fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
		}
	}
	read, err := franzConfigs(ctx, adm, args[0], sortedKeys(configs))
	if err != nil {
		return nil, err
	}
	return map[string]any{"configs": read}, nil
}

// produce TOPIC PARTITION COUNT PREFIX [idempotent]: keyed records; the offsets acknowledged.
func franzProduce(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	opts := []kgo.Opt{kgo.DisableIdempotentWrite()}
	if len(args) > 4 && args[4] == "idempotent" {
		opts = nil // franz-go is idempotent by default
	}
	cl, err := franzClient(bootstrap, opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := 0; i < atoi(args[2]); i++ {
		recs = append(recs, &kgo.Record{
			Topic: args[0], Partition: int32(atoi(args[1])),
			Key: []byte(fmt.Sprintf("%s-k%d", args[3], i)), Value: []byte(fmt.Sprintf("%s-v%d", args[3], i)),
		})
	}
	results := cl.ProduceSync(ctx, recs...)
	if err := results.FirstErr(); err != nil {
		return nil, err
	}
	offsets := []int64{}
	for _, r := range results {
		offsets = append(offsets, r.Record.Offset)
	}
	return map[string]any{"offsets": offsets}, nil
}

// poll reads until count records came or the context ends; fetch errors fail it.
func franzPoll(ctx context.Context, cl *kgo.Client, count int) ([]record, error) {
	got := []record{}
	for len(got) < count {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return got, fmt.Errorf("read %d of %d records: %w", len(got), count, ctx.Err())
		}
		for _, fe := range fetches.Errors() {
			return got, fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			got = append(got, rec(r.Partition, r.Offset, r.Key, r.Value))
		})
	}
	return got, nil
}

// consume TOPIC PARTITION COUNT [read_committed]: from the start, outside any group.
func franzConsume(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	opts := []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		args[0]: {int32(atoi(args[1])): kgo.NewOffset().AtStart()},
	})}
	if len(args) > 3 && args[3] == "read_committed" {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := franzClient(bootstrap, opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	got, err := franzPoll(ctx, cl, atoi(args[2]))
	if err != nil {
		return nil, err
	}
	return map[string]any{"records": got}, nil
}

// group TOPIC GROUP COUNT: a member reads COUNT records, commits them and leaves.
func franzGroup(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cl, err := franzClient(bootstrap,
		kgo.ConsumeTopics(args[0]), kgo.ConsumerGroup(args[1]), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(6e9), kgo.HeartbeatInterval(5e8))
	if err != nil {
		return nil, err
	}
	got, err := franzPoll(ctx, cl, atoi(args[2]))
	if err != nil {
		cl.Close()
		return nil, err
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		cl.Close()
		return nil, err
	}
	cl.LeaveGroup()
	cl.Close()
	adm, acl, err := franzAdmin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer acl.Close()
	fetched, err := adm.FetchOffsets(ctx, args[1])
	if err != nil {
		return nil, err
	}
	committed := map[string]int64{}
	fetched.Each(func(o kadm.OffsetResponse) {
		committed[fmt.Sprint(o.Partition)] = o.At
	})
	described, err := adm.DescribeGroups(ctx, args[1])
	if err != nil {
		return nil, err
	}
	return map[string]any{"records": got, "committed": committed, "state": described[args[1]].State}, nil
}

// group_offsets GROUP TOPIC PARTITION NEW: fetch, commit NEW through the admin, fetch again.
func franzGroupOffsets(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	adm, cl, err := franzAdmin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	read := func() (map[string]int64, error) {
		fetched, err := adm.FetchOffsets(ctx, args[0])
		if err != nil {
			return nil, err
		}
		out := map[string]int64{}
		fetched.Each(func(o kadm.OffsetResponse) { out[fmt.Sprintf("%s:%d", o.Topic, o.Partition)] = o.At })
		return out, nil
	}
	before, err := read()
	if err != nil {
		return nil, err
	}
	var change kadm.Offsets
	change.AddOffset(args[1], int32(atoi(args[2])), int64(atoi(args[3])), -1)
	committed, err := adm.CommitOffsets(ctx, args[0], change)
	if err != nil {
		return nil, err
	}
	if err := committed.Error(); err != nil {
		return nil, err
	}
	after, err := read()
	if err != nil {
		return nil, err
	}
	return map[string]any{"before": before, "after": after}, nil
}

// list_offsets TOPIC PARTITION: the start and end offsets.
func franzListOffsets(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	adm, cl, err := franzAdmin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	p := int32(atoi(args[1]))
	starts, err := adm.ListStartOffsets(ctx, args[0])
	if err != nil {
		return nil, err
	}
	ends, err := adm.ListEndOffsets(ctx, args[0])
	if err != nil {
		return nil, err
	}
	s, _ := starts.Lookup(args[0], p)
	e, _ := ends.Lookup(args[0], p)
	if s.Err != nil {
		return nil, s.Err
	}
	if e.Err != nil {
		return nil, e.Err
	}
	return map[string]any{"earliest": s.Offset, "latest": e.Offset}, nil
}

// txn TOPIC TXID PREFIX COMMITTED ABORTED: one committed transaction, then one aborted.
func franzTxn(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cl, err := franzClient(bootstrap, kgo.TransactionalID(args[1]))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	for round, what := range []string{"committed", "aborted"} {
		if err := cl.BeginTransaction(); err != nil {
			return nil, err
		}
		var recs []*kgo.Record
		for i := 0; i < atoi(args[3+round]); i++ {
			recs = append(recs, &kgo.Record{Topic: args[0], Partition: 0,
				Key: []byte(fmt.Sprintf("%s-k%d", args[2], i)), Value: []byte(fmt.Sprintf("%s-%s%d", args[2], what, i))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return nil, err
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(round == 0)); err != nil {
			return nil, err
		}
	}
	return map[string]any{"done": true}, nil
}

// delete_records TOPIC PARTITION BEFORE: the low watermark answered and then listed.
func franzDeleteRecords(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	adm, cl, err := franzAdmin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	p := int32(atoi(args[1]))
	var before kadm.Offsets
	before.AddOffset(args[0], p, int64(atoi(args[2])), -1)
	deleted, err := adm.DeleteRecords(ctx, before)
	if err != nil {
		return nil, err
	}
	d, ok := deleted.Lookup(args[0], p)
	if !ok {
		return nil, errors.New("partition missing from DeleteRecords answer")
	}
	if d.Err != nil {
		return nil, d.Err
	}
	starts, err := adm.ListStartOffsets(ctx, args[0])
	if err != nil {
		return nil, err
	}
	s, _ := starts.Lookup(args[0], p)
	return map[string]any{"low_watermark": d.LowWatermark, "earliest": s.Offset}, nil
}

// acls TOPIC PRINCIPAL: create READ and WRITE for PRINCIPAL, describe, delete, describe again.
func franzACLs(bootstrap string, args []string) (any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	adm, cl, err := franzAdmin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	acls := func() *kadm.ACLBuilder {
		return kadm.NewACLs().Allow(args[1]).AllowHosts("*").Topics(args[0]).
			ResourcePatternType(kadm.ACLPatternLiteral)
	}
	created, err := adm.CreateACLs(ctx, acls().Operations(kadm.OpRead, kadm.OpWrite))
	if err != nil {
		return nil, err
	}
	for _, c := range created {
		if c.Err != nil {
			return nil, fmt.Errorf("%w: %s", c.Err, c.ErrMessage)
		}
	}
	describe := func() ([]any, error) {
		results, err := adm.DescribeACLs(ctx, acls().Operations(kadm.OpAny))
		if err != nil {
			return nil, err
		}
		out := []any{}
		for _, r := range results {
			if r.Err != nil {
				return nil, r.Err
			}
			for _, d := range r.Described {
				out = append(out, map[string]any{
					"principal": d.Principal, "operation": d.Operation.String(), "permission": d.Permission.String(),
				})
			}
		}
		return out, nil
	}
	described, err := describe()
	if err != nil {
		return nil, err
	}
	deletedResults, err := adm.DeleteACLs(ctx, acls().Operations(kadm.OpAny))
	if err != nil {
		return nil, err
	}
	deleted := 0
	for _, r := range deletedResults {
		if r.Err != nil {
			return nil, r.Err
		}
		deleted += len(r.Deleted)
	}
	after, err := describe()
	if err != nil {
		return nil, err
	}
	return map[string]any{"described": described, "deleted": deleted, "after": len(after)}, nil
}
