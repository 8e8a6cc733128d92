//! Kubernetes API simulator.
