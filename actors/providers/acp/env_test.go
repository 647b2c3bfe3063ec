package acp_test

import (
	"regexp"
	"testing"

	"github.com/subactor/subactor/actors/providers/acp"
	"github.com/subactor/subactor/internal/testkit"
	"github.com/subactor/subactor/subagent"
)

// Contract K3: the node's variables that carry credentials, by their name
// or by their value, stay out of an agent's environment; the ones an
// agent needs and that only look alike pass.
func TestK3_CredentialsStayOutOfTheAgentsEnvironment(t *testing.T) {
	for _, c := range []struct {
		name, value string
		withheld    bool
	}{
		{"DATABASE_URL", "postgres://app:s3cret@db.internal:5432/app", true},
		{"MYSQL_PWD", "s3cret", true},
		{"NPM_CONFIG__AUTH", "dXNlcjpwYXNz", true},
		{"npm_config__auth", "dXNlcjpwYXNz", true},
		{"SENTRY_DSN", "https://examplePublicKey@o0.ingest.sentry.io/0", true},
		{"GH_AUTH", "gho_x", true},
		{"DOCKER_AUTH_CONFIG", `{"auths":{}}`, true},
		{"FTP_PWD", "x", true},
		{"RABBITMQ_DEFAULT_PASS", "x", true},
		{"DB_PW", "x", true},
		{"AZURE_DEVOPS_PAT", "x", true},
		{"BORG_PASSPHRASE", "x", true},
		{"REDISCLI_AUTH", "x", true},
		{"HTTPS_PROXY", "http://user:pass@proxy.internal:3128", true},
		{"https_proxy", "http://token@proxy.internal:3128/", true},
		{"PIP_EXTRA_INDEX_URL", "https://pypi.org/simple https://u:t@pypi.internal/simple", true},
		{"SQLSERVER", "Server=db;User Id=app;Password=s3cret;", true},
		{"ODBC", "Driver=x;Uid=app;Pwd=s3cret", true},
		{"DEPLOY_PEM", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n-----END OPENSSH PRIVATE KEY-----", true},
		{"PWD", "/home/user/project", false},
		{"OLDPWD", "/home/user", false},
		{"PATH", "/usr/bin:/bin", false},
		{"GIT_AUTHOR_NAME", "A. User", false},
		{"GIT_AUTHOR_EMAIL", "user@example.com", false},
		{"HTTP_PROXY", "http://proxy.internal:3128", false},
		{"NO_PROXY", "localhost,127.0.0.1", false},
		{"XAUTHORITY", "/run/user/1000/.Xauthority", false},
		{"DOCS_URL", "https://example.com/users/@me?tab=1", false},
		{"PASSENGER_APP_ENV", "production", false},
		{"SPASSWORDLESS", "x", true}, // contains PASSWORD: held back, a known cost
	} {
		if got := acp.IsCredential(c.name, c.value); got != c.withheld {
			t.Errorf("IsCredential(%q, %q) = %v, want %v", c.name, c.value, got, c.withheld)
		}
	}

	// End to end: a proxy URL with a password is withheld whatever its
	// name; the agent gets its tag.
	t.Setenv("ACPTEST_UPSTREAM", "http://user:pass@proxy.internal:3128")
	sys := newSystem(t)
	res := wait(t, start(t, testkit.Ctx(t), newProvider(t, fakeConfig(t, sys, modeNormal)), request(
		"env ACPTEST_UPSTREAM", "env "+acp.EnvAgentTag)))
	want := regexp.MustCompile(`^env:ACPTEST_UPSTREAM=<unset>;env:` + acp.EnvAgentTag + `=[0-9a-f-]{36};$`)
	if got := subagent.TextOf(res.Output); !want.MatchString(got) {
		t.Fatalf("env %q, want %s", got, want)
	}
}
