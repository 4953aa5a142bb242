// Command judge drives one Go Kafka client (franz-go, sarama or segmentio/kafka-go), or
// franz-go's schema registry client (sr, whose BOOTSTRAP is the registry's URL), through
// one scenario of tests/e2e/test_judges.py and prints its outcome as one line of JSON:
// {"ok": ...} or {"error": "..."}. Usage: judge CLIENT SCENARIO BOOTSTRAP [ARGS...].
// The assertions live in the Python suite; a driver only says what its client reported.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// wait bounds every client call: a broker that never answers fails the scenario, not the run.
const wait = 30 * time.Second

// scenario runs against bootstrap with the scenario's arguments.
type scenario func(bootstrap string, args []string) (any, error)

var clients = map[string]map[string]scenario{
	"franz":   franzScenarios,
	"sarama":  saramaScenarios,
	"kafkago": kafkaGoScenarios,
	"sr":      srScenarios,
}

// record is one consumed record: partition, offset, key, value.
type record [4]any

func rec(partition int32, offset int64, key, value []byte) record {
	return record{partition, offset, string(key), string(value)}
}

// pairs parses name=value arguments.
func pairs(words []string) map[string]string {
	out := map[string]string{}
	for _, w := range words {
		k, v, _ := strings.Cut(w, "=")
		out[k] = v
	}
	return out
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(fmt.Sprintf("not a number: %q", s))
	}
	return n
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func main() {
	out := json.NewEncoder(os.Stdout)
	if len(os.Args) < 4 {
		_ = out.Encode(map[string]any{"error": "usage: judge CLIENT SCENARIO BOOTSTRAP [ARGS...]"})
		os.Exit(2)
	}
	run, ok := clients[os.Args[1]][os.Args[2]]
	if !ok {
		_ = out.Encode(map[string]any{"error": "unknown client or scenario: " + os.Args[1] + " " + os.Args[2]})
		os.Exit(2)
	}
	result, err := run(os.Args[3], os.Args[4:])
	if err != nil {
		_ = out.Encode(map[string]any{"error": err.Error()})
		return
	}
	_ = out.Encode(map[string]any{"ok": result})
}
