package main

// franz-go's pkg/sr: the schema registry client and its Serde (Confluent's wire format: a
// zero byte, the schema id big-endian, then the payload). Here the BOOTSTRAP argument is
// the registry's URL. Usage: judge sr flow URL SUBJECT_PREFIX.

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

var srScenarios = map[string]scenario{
	"flow": srFlow,
}

const (
	srUserV1 = `{"type":"record","name":"User","namespace":"brokerd.judge","fields":[{"name":"name","type":"string"}]}`
	// A new field with a default: readers of v2 read v1 data (BACKWARD).
	srUserV2 = `{"type":"record","name":"User","namespace":"brokerd.judge","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","default":0}]}`
	// A new field without a default: v3 readers cannot read v1 data.
	srUserV3 = `{"type":"record","name":"User","namespace":"brokerd.judge","fields":[{"name":"name","type":"string"},{"name":"email","type":"string"}]}`
	srPerson = `{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"]}`
)

// srPersonValue is what the Serde encodes as JSON under the JSON Schema srPerson.
type srPersonValue struct {
	Name string `json:"name"`
	Age  int    `json:"age"`
}

// srFailure is what a registry error looks like in the answer: its HTTP status, Confluent's
// error code and message.
func srFailure(err error) map[string]any {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		return map[string]any{"status": re.StatusCode, "error_code": re.ErrorCode, "message": re.Message}
	}
	return map[string]any{"status": 0, "message": err.Error()}
}

func srFlow(url string, args []string) (any, error) {
	prefix := args[0]
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	cl, err := sr.NewClient(sr.URLs(url), sr.HTTPClient(&http.Client{Timeout: 10 * time.Second}))
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	subject := prefix + "-avro-value"

	types, err := cl.SupportedTypes(ctx)
	if err != nil {
		return nil, err
	}
	out["types"] = types

	// CreateSchema registers, then finds the version through /schemas/ids/{id}/versions.
	created, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: srUserV1})
	if err != nil {
		return nil, err
	}
	out["created"] = map[string]any{"subject": created.Subject, "version": created.Version, "id": created.ID}
	again, err := cl.RegisterSchema(ctx, subject, sr.Schema{Schema: srUserV1}, -1, -1)
	if err != nil {
		return nil, err
	}
	out["again"] = again

	byID, err := cl.SchemaByID(ctx, created.ID)
	if err != nil {
		return nil, err
	}
	out["by_id"] = map[string]any{"type": byID.Type.String(), "schema": byID.Schema}
	looked, err := cl.LookupSchema(ctx, subject, sr.Schema{Schema: srUserV1})
	if err != nil {
		return nil, err
	}
	out["lookup"] = map[string]any{"subject": looked.Subject, "version": looked.Version, "id": looked.ID}
	subjects, err := cl.SubjectsByID(ctx, created.ID)
	if err != nil {
		return nil, err
	}
	out["subjects_by_id"] = subjects

	good, err := cl.CheckCompatibility(ctx, subject, -1, sr.Schema{Schema: srUserV2})
	if err != nil {
		return nil, err
	}
	bad, err := cl.CheckCompatibility(ctx, subject, -1, sr.Schema{Schema: srUserV3})
	if err != nil {
		return nil, err
	}
	out["compatible_v2"] = good.Is
	out["compatible_v3"] = bad.Is
	if _, err := cl.RegisterSchema(ctx, subject, sr.Schema{Schema: srUserV3}, -1, -1); err != nil {
		out["register_v3"] = srFailure(err)
	} else {
		out["register_v3"] = "accepted"
	}
	v2, err := cl.RegisterSchema(ctx, subject, sr.Schema{Schema: srUserV2}, -1, -1)
	if err != nil {
		return nil, err
	}
	out["v2"] = v2
	versions, err := cl.SubjectVersions(ctx, subject)
	if err != nil {
		return nil, err
	}
	out["versions"] = versions
	latest, err := cl.SchemaByVersion(ctx, subject, -1)
	if err != nil {
		return nil, err
	}
	out["latest"] = map[string]any{"version": latest.Version, "id": latest.ID}
	levels := cl.Compatibility(ctx)
	if len(levels) != 1 || levels[0].Err != nil {
		return nil, errors.Join(errors.New("global compatibility"), levels[0].Err)
	}
	out["global_level"] = levels[0].Level.String()
	if _, err := cl.SchemaByID(ctx, 1<<30); err != nil {
		out["missing_id"] = srFailure(err)
	}

	// The Serde with a JSON Schema: encode with the registered id, decode it back.
	jsonSubject := prefix + "-json-value"
	person, err := cl.CreateSchema(ctx, jsonSubject, sr.Schema{Schema: srPerson, Type: sr.TypeJSON})
	if err != nil {
		return nil, err
	}
	var serde sr.Serde
	serde.Register(person.ID, srPersonValue{},
		sr.EncodeFn(func(v any) ([]byte, error) { return json.Marshal(v) }),
		sr.DecodeFn(func(b []byte, v any) error { return json.Unmarshal(b, v) }),
	)
	encoded, err := serde.Encode(srPersonValue{Name: "ada", Age: 36})
	if err != nil {
		return nil, err
	}
	var decoded srPersonValue
	if err := serde.Decode(encoded, &decoded); err != nil {
		return nil, err
	}
	id, _, err := serde.DecodeID(encoded)
	if err != nil {
		return nil, err
	}
	out["serde"] = map[string]any{
		"id": person.ID, "encoded": hex.EncodeToString(encoded), "decoded_id": id,
		"decoded": decoded,
	}
	return out, nil
}
