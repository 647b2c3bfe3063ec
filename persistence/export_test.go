package persistence

import "os"

// OpenBoltWithFile is OpenBolt with the function bbolt opens its file
// with, so that a test can hold the *os.File and break it.
func OpenBoltWithFile(path string, openFile func(string, int, os.FileMode) (*os.File, error)) (Backend, error) {
	return asBackend(openBolt(path, openWrite, openFile))
}

// OpenBoltReadOnlyWithFile is OpenBoltReadOnly with the function bbolt
// opens its file with, so that a test sees how it is opened.
func OpenBoltReadOnlyWithFile(path string, openFile func(string, int, os.FileMode) (*os.File, error)) (Backend, error) {
	return asBackend(openBolt(path, openRead, openFile))
}

// SetPutHook makes the bbolt store s call hook before it puts each record,
// failing the transaction with the hook's error; nil removes the hook.
func SetPutHook(s Backend, hook func(seq uint64) error) {
	b := s.(*boltStore)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.putHook = hook
}
