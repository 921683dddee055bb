package store

import (
	"sync"
	"sync/atomic"
)

// Registry is a list of callbacks taking a T, as drivers keep them for Subscribe and
// SubscribeChanges. The zero value is ready to use and safe for concurrent use; List never
// blocks on Add or a cancel.
type Registry[T any] struct {
	mu   sync.Mutex
	fns  []registered[T] // in registration order
	next int
	list atomic.Pointer[[]func(T)]
}

type registered[T any] struct {
	id int
	fn func(T)
}

// Subscribers is the registry of commit callbacks a driver keeps for Subscribe.
type Subscribers = Registry[Commit]

// Add registers fn and returns the func that unregisters it (safe to call more than once).
func (s *Registry[T]) Add(fn func(T)) (cancel func()) {
	s.mu.Lock()
	id := s.next
	s.next++
	s.fns = append(s.fns, registered[T]{id, fn})
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
func (s *Registry[T]) publish() {
	list := make([]func(T), len(s.fns))
	for i, sub := range s.fns {
		list[i] = sub.fn
	}
	s.list.Store(&list)
}

// List returns the callbacks in registration order. The slice must not be modified.
func (s *Registry[T]) List() []func(T) {
	if l := s.list.Load(); l != nil {
		return *l
	}
	return nil
}
