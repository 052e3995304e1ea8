// Package domain is the heart of resplane: the rules of the resource plane expressed as values
// and pure functions. Nothing under domain/ performs I/O or imports anything outside the
// standard library; every clock reading, key and random nonce arrives as an argument.
package domain
