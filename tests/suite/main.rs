//! spanset's integration tests, one binary: each module is what was a test file of its own
//! (`cargo test --test suite kubectl::` runs one of them). One binary links once, and its tests
//! run side by side across modules (the thread count is `.cargo/config.toml`'s
//! `RUST_TEST_THREADS`): most of them wait on a sandbox's clocks, not on a core.

mod model;
mod plan_gen;
// A frozen copy of the planner (plan_differential compares with it): what the comparison does
// not call stays as it was.
#[allow(dead_code)]
mod plan_reference;
mod support;

mod account;
mod admission;
mod advanced_statefulset;
mod api_reference;
mod blog_migration;
mod book_scenarios;
mod citations;
mod completion_cli;
mod connections;
mod controller;
mod controller_bad_input;
mod controller_resilience;
mod crd_deletion;
mod crd_schema;
mod crd_validation;
mod crds;
mod credentials;
mod deploy;
mod disruption;
mod disruption_budgets;
mod doc_flags;
mod doc_links;
mod doc_manifests;
mod drill;
mod drill_chaos;
mod etcd_quorum;
mod failover;
mod faults;
mod features;
mod fencing;
mod hidden_pods;
mod hung_member;
mod identity_gate;
mod idle;
mod images;
mod join;
mod kruise;
mod kube_client;
mod kubectl;
mod kubectl_explain;
mod kubectl_story;
mod layering;
mod leader;
mod least_privilege;
mod logs;
mod member_forbidden;
mod member_identity;
mod mixed_versions;
mod model_check;
mod move_cost;
mod network_identity;
mod observability;
mod ordering;
mod plan_cli;
mod plan_differential;
mod plan_props;
mod processes;
mod redis_cluster;
mod redis_drill;
mod refused_writes_nothing;
mod replica_bounds;
mod rollout;
mod rollout_status;
mod runbooks;
mod sandbox_cli;
mod scaling;
mod shards;
mod sim_auth;
mod sim_cli;
mod sim_discovery;
mod sim_dns;
mod sim_events_logs;
mod sim_exec;
mod sim_idle;
mod sim_network;
mod sim_tls;
mod status_cli;
mod storage;
mod teardown;
mod terms;
mod undecodable;
mod uninstall;
mod version_cli;
