package nats

// ParseViolation is parseViolation for the tests: whether err is a permission violation, whether of a
// subscription, and the subject it names.
func ParseViolation(err error) (ok, subscribe bool, subject string) {
	v, ok := parseViolation(err)
	return ok, v.subscribe, v.subject
}
