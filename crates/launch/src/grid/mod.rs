//! Jobs across real hosts and sites: `gwrun -f MACHINES`.
//!
//! The front end (`gwrun` on the user's machine) starts one *proxy* per
//! host — `gwrun` itself in proxy mode — as a tree: one connection per
//! site from the front end to the site's *leader* proxy (its first host,
//! or its gateway), and one from the leader to each other host of the
//! site. That keeps the front end's connections O(sites), works for a site
//! behind a firewall (only its gateway is reached from outside), and sends
//! staged files over the wide area once per site.
//!
//! - [`protocol`]: the frames and messages, free of I/O.
//! - [`channel`]: a non-blocking framed byte stream with heartbeats.
//! - [`start`]: how a proxy is started on a host (`local`, `ssh`), one
//!   file per method behind [`start::StartMethod`]; [`bootstrap`] puts the
//!   proxy binary on a host that has no gridwire, through the same channel.
//! - [`proxy`]: proxy mode — forks the host's ranks, serves them PMI,
//!   forwards output and exits, takes part in the job-wide fence.
//! - [`frontend`]: the front end — plans the tree, relays nothing but
//!   decisions, prints output, and tears the job down on the first failure.
//!
//! Every proxy↔parent channel carries the job secret's proof (the secret
//! travels in the first message over the ssh channel, never on a command
//! line), a protocol version check, and heartbeats: a silent peer for
//! `GW_HEARTBEAT_TIMEOUT` seconds (default 10) ends the job.

pub mod bootstrap;
pub mod channel;
pub mod frontend;
pub mod link;
pub mod protocol;
pub mod proxy;
pub mod relay;
pub mod stagein;
pub mod start;
pub mod transforms;
