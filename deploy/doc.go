// Package deploy holds no code: its directory has the deployment examples (Kubernetes, Prometheus,
// Grafana, docker-compose), and its tests check them against the configuration and metrics mqtarget
// really has.
package deploy
