package store

import (
	"sync"
	"sync/atomic"
)

// Subscribers is the registry of commit callbacks a driver keeps for Subscribe. The zero value
// is ready to use and safe for concurrent use; List never blocks on Add or a cancel.
type Subscribers struct {
	mu   sync.Mutex
	fns  []subscriber // in registration order
	next int
	list atomic.Pointer[[]func(Commit)]
}

type subscriber struct {
	id int
	fn func(Commit)
}

// Add registers fn and returns the func that unregisters it (safe to call more than once).
func (s *Subscribers) Add(fn func(Commit)) (cancel func()) {
	s.mu.Lock()
	id := s.next
	s.next++
	s.fns = append(s.fns, subscriber{id, fn})
	s.publish()
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			for i, sub := range s.fns {
				if sub.id == id {
					s.fns = append(s.fns[:i:i], s.fns[i+1:]...)
					break
				}
			}
			s.publish()
			s.mu.Unlock()
		})
	}
}

// publish stores a fresh copy of the callbacks; the caller holds mu.
func (s *Subscribers) publish() {
	list := make([]func(Commit), len(s.fns))
	for i, sub := range s.fns {
		list[i] = sub.fn
	}
	s.list.Store(&list)
}

// List returns the callbacks in registration order. The slice must not be modified.
func (s *Subscribers) List() []func(Commit) {
	if l := s.list.Load(); l != nil {
		return *l
	}
	return nil
}
