// Package store defines the storage interface of sessiond and the errors and limits every
// driver shares. Drivers live in subpackages (store/sqlite, store/postgres) and prove their
// behaviour by running the conformance suite in store/storetest.
package store
