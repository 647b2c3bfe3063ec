package acp_test

import (
	"fmt"
	"sort"

	"github.com/subactor/subactor/actors/providers/acp"
)

// A node's config file in the shape editors use for ACP agents, with our
// own keys beside theirs. Each server becomes one provider's Config: add
// the actor System (and a Store for resumable children) and pass it to
// acp.New.
func ExampleParseConfigFile() {
	cfgs, err := acp.ParseConfigFile([]byte(`{
		"agent_servers": {
			"example": {"command": "agent"},
			"qwen": {
				"command": "qwen", "args": ["--acp"],
				"env": {"OPENAI_BASE_URL": "http://127.0.0.1:8080/v1", "OPENAI_API_KEY": "local"},
				"dir": "/srv/project", "read_files": true
			}
		}
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	names := make([]string, 0, len(cfgs))
	for n := range cfgs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := cfgs[n]
		fmt.Println(c.Name, c.Command, c.Args, c.Dir, c.ReadFiles)
	}
	_, err = acp.ParseConfigFile([]byte(`{"agent_servers": {"x": {"command": "x", "cwd": "/"}}}`))
	fmt.Println(err)
	// Output:
	// example agent []  false
	// qwen qwen [--acp] /srv/project true
	// acp: invalid config: unknown key "cwd" at /agent_servers/x (keys are case-sensitive)
}
