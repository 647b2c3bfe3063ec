package acp_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/subactor/subactor/actors/providers/acp"
)

// Contract P3: the agent_servers config file editors use maps onto
// Configs, with our own keys, and anything else is refused.
func TestP3_ParseConfigFile(t *testing.T) {
	cfgs, err := acp.ParseConfigFile([]byte(`{
		"agent_servers": {
			"example": {"type": "custom", "command": "agent"},
			"qwen": {
				"command": "qwen", "args": ["--acp"],
				"env": {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "OPENAI_API_KEY": "x"},
				"dir": "/work", "permissions": "allow-all", "read_files": true, "write_files": false,
				"start_timeout": "2m30s"
			}
		}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	ex, qw := cfgs["example"], cfgs["qwen"]
	if len(cfgs) != 2 || ex.Name != "example" || ex.Command != "agent" || ex.Args != nil || ex.Permissions != nil || ex.StartTimeout != 0 {
		t.Fatalf("example %+v", ex)
	}
	if qw.Name != "qwen" || qw.Command != "qwen" || !slices.Equal(qw.Args, []string{"--acp"}) ||
		qw.Env["OPENAI_API_KEY"] != "x" || qw.Dir != "/work" || !qw.ReadFiles || qw.WriteFiles || qw.StartTimeout != 150*time.Second ||
		qw.Permissions == nil || !qw.Permissions(context.Background(), acp.ToolCall{Kind: "execute"}) {
		t.Fatalf("qwen %+v", qw)
	}
	for name, bad := range map[string]string{
		"not json":               `{"agent_servers":`,
		"not an object":          `[]`,
		"trailing data":          `{"agent_servers":{}} {}`,
		"no agent_servers":       `{}`,
		"unknown top key":        `{"agent_servers":{}, "servers":{}}`,
		"repeated top key":       `{"agent_servers":{}, "agent_servers":{}}`,
		"servers not object":     `{"agent_servers":[]}`,
		"empty name":             `{"agent_servers":{"":{"command":"a"}}}`,
		"no command":             `{"agent_servers":{"a":{"args":[]}}}`,
		"blank command":          `{"agent_servers":{"a":{"command":"  "}}}`,
		"null command":           `{"agent_servers":{"a":{"command":null}}}`,
		"command not string":     `{"agent_servers":{"a":{"command":7}}}`,
		"key case":               `{"agent_servers":{"a":{"Command":"a"}}}`,
		"repeated key":           `{"agent_servers":{"a":{"command":"a","command":"b"}}}`,
		"unknown key":            `{"agent_servers":{"a":{"command":"a","default_mode":"x"}}}`,
		"args not strings":       `{"agent_servers":{"a":{"command":"a","args":[1]}}}`,
		"null arg":               `{"agent_servers":{"a":{"command":"a","args":["x",null]}}}`,
		"env not object":         `{"agent_servers":{"a":{"command":"a","env":["X=1"]}}}`,
		"env null value":         `{"agent_servers":{"a":{"command":"a","env":{"X":null}}}}`,
		"env number":             `{"agent_servers":{"a":{"command":"a","env":{"X":1}}}}`,
		"env name with =":        `{"agent_servers":{"a":{"command":"a","env":{"X=Y":"1"}}}}`,
		"env repeated":           `{"agent_servers":{"a":{"command":"a","env":{"X":"1","X":"2"}}}}`,
		"relative dir":           `{"agent_servers":{"a":{"command":"a","dir":"work"}}}`,
		"unknown permissions":    `{"agent_servers":{"a":{"command":"a","permissions":"maybe"}}}`,
		"registry type":          `{"agent_servers":{"a":{"type":"registry","command":"a"}}}`,
		"null type":              `{"agent_servers":{"a":{"type":null,"command":"a"}}}`,
		"flag not bool":          `{"agent_servers":{"a":{"command":"a","read_files":"yes"}}}`,
		"start_timeout number":   `{"agent_servers":{"a":{"command":"a","start_timeout":60}}}`,
		"start_timeout no unit":  `{"agent_servers":{"a":{"command":"a","start_timeout":"60"}}}`,
		"start_timeout zero":     `{"agent_servers":{"a":{"command":"a","start_timeout":"0s"}}}`,
		"start_timeout negative": `{"agent_servers":{"a":{"command":"a","start_timeout":"-1m"}}}`,
		"start_timeout null":     `{"agent_servers":{"a":{"command":"a","start_timeout":null}}}`,
		"NUL in arg":             `{"agent_servers":{"a":{"command":"a","args":["x\u0000y"]}}}`,
		"not UTF-8":              "{\"agent_servers\":{\"a\":{\"command\":\"\xff\"}}}",
	} {
		if _, err := acp.ParseConfigFile([]byte(bad)); !errors.Is(err, acp.ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Contract P3: New refuses a configuration it cannot run.
func TestP3_NewRefusesBadConfig(t *testing.T) {
	sys := newSystem(t)
	for name, cfg := range map[string]acp.Config{
		"no system":    {Command: "agent"},
		"no command":   {System: sys},
		"relative dir": {System: sys, Command: "agent", Dir: "x"},
		"bad env":      {System: sys, Command: "agent", Env: map[string]string{"": "x"}},
	} {
		if _, err := acp.New(cfg); !errors.Is(err, acp.ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
