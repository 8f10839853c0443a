package publishers

// Secret is a string setting that -print-config and logs show redacted.
type Secret string

// MarshalYAML implements yaml.Marshaler: a set secret prints as "<redacted>", an unset one as "".
func (s Secret) MarshalYAML() (any, error) {
	if s == "" {
		return "", nil
	}
	return "<redacted>", nil
}

// String redacts the secret wherever it is formatted (flag defaults, logs).
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "<redacted>"
}
