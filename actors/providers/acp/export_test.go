package acp

import "github.com/subactor/subactor/internal/agentproc"

// Names the tests reach that are not API.
const (
	MaxRequests  = maxRequests
	MaxHeldBytes = maxHeldBytes
	MaxLine      = maxLine
	EnvAgentTag  = agentproc.EnvAgentTag
)

type (
	Run        = childRun
	StartError = startError
	DirError   = dirError
)

var (
	IsCredential     = isCredential
	IsCredentialName = isCredentialName
)

// ContinuePrompt exposes continuePrompt to the external tests.
const ContinuePrompt = continuePrompt
