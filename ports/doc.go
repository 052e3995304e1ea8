// Package ports declares what the application needs from the outside world, one small
// interface per need. Each interface is owned by its consumer (the application) and documents
// the errors an implementation returns, so a fake and the real adapter can be held to one
// contract.
package ports
