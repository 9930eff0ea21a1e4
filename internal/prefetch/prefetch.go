// Package prefetch asks the CPU to bring memory into cache ahead of use,
// so that a loop over random addresses (hash tables too big for the cache)
// overlaps its misses instead of paying them one after another.
package prefetch
