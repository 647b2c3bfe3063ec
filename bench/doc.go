// Package bench measures subactor beside the raw actor runtime it is built
// on. It is a module of its own so that the peers it compares against never
// enter the product's module. Run ./run.sh for RESULTS.md.
package bench
