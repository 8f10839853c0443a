package nats

// LimitLog is limitLog for the external tests.
var LimitLog = limitLog
