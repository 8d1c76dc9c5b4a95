//! Which links get which transforms.
//!
//! * `GW_ENCRYPT=always|sites|never` (default `sites`): encrypt every link
//!   between hosts, only links between sites, or none.
//! * `GW_COMPRESS=always|sites|never` (default `never`): the same for
//!   compression (off unless asked: see the length side channel in docs/wan.md).
//! * `gwrun -f` sets both per site from the machines file's `encrypt=` and
//!   `compress=`, and `GW_SITES` to the number of sites of the job.
//!
//! Links within a host (self, shm) never carry transforms. A process builds
//! the stacks it may need at start-up, over each socket method it runs
//! (`encrypt+tcp`, `encrypt+udp`, …), and only when it may need them: with
//! `sites`, only in a job of more than one site, so a one-site job has no
//! extra socket to poll.

use super::{registry, TransformMethod};
use crate::error::{Error, Result};
use crate::method::{Method, MethodEnv};
use crate::params::{Kind, ParamDecl, Params};
use std::sync::Arc;

pub const PARAMS: &[ParamDecl] = &[
    ParamDecl {
        name: "ENCRYPT",
        default: "sites",
        kind: Kind::Choice(&["always", "sites", "never"]),
        help: "Which links are encrypted (the encrypt transform): `sites` = links between \
               sites, `always` = every link between hosts, `never`. Links within a host never \
               are. `gwrun -f` sets it per site from the machines file's `encrypt=`.",
    },
    ParamDecl {
        name: "COMPRESS",
        default: "never",
        kind: Kind::Choice(&["always", "sites", "never"]),
        help: "Which links are compressed (the compress transform), as GW_ENCRYPT. \
               `gwrun -f` sets it per site from the machines file's `compress=`.",
    },
    ParamDecl {
        name: "SITES",
        default: "0",
        kind: Kind::UInt { min: 0, max: 4096 },
        help: "Number of sites of the job (set by `gwrun -f`); 0 = unknown, taken as several \
               when GW_SITE is set. With `sites` policies, transform stacks are built only \
               when the job has more than one site.",
    },
    ParamDecl {
        name: "TRANSFORM_OFFER",
        default: "",
        kind: Kind::Text,
        help: "Comma-separated transform sets (`encrypt`, `compress+encrypt`) to offer to senders \
               besides those of this process's own policy: other sites may send with other \
               settings. Set by `gwrun -f` from every site's `encrypt=` and `compress=`.",
    },
];

/// Which links a setting applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Never,
    Sites,
    Always,
}

impl Scope {
    fn parse(v: &str) -> Scope {
        match v {
            "always" => Scope::Always,
            "sites" => Scope::Sites,
            _ => Scope::Never,
        }
    }
    fn applies(self, same_site: bool) -> bool {
        match self {
            Scope::Never => false,
            Scope::Sites => !same_site,
            Scope::Always => true,
        }
    }
}

/// The transform policy of this process.
#[derive(Debug, Clone)]
pub struct Policy {
    pub encrypt: Scope,
    pub compress: Scope,
    /// The job may span several sites.
    pub multi_site: bool,
    /// `GW_METHODS` names the methods (and stacks) itself: no filtering.
    pub explicit: bool,
    /// Sets other processes may send with (`GW_TRANSFORM_OFFER`).
    pub offer: Vec<Vec<&'static str>>,
}

impl Policy {
    pub fn from_params(params: &Params) -> Result<Policy> {
        let sites = params.num("SITES");
        let mut offer = Vec::new();
        for set in params.text("TRANSFORM_OFFER").split(',').map(str::trim) {
            if set.is_empty() {
                continue;
            }
            let (ts, _) =
                super::parse_stack(&format!("{set}+base")).ok_or_else(|| Error::BadParam {
                    var: "GW_TRANSFORM_OFFER".into(),
                    value: params.text("TRANSFORM_OFFER").into(),
                    reason: format!("{set:?} is not a list of transforms in stack order"),
                })?;
            offer.push(ts.iter().map(|t| t.name).collect());
        }
        Ok(Policy {
            encrypt: Scope::parse(params.text("ENCRYPT")),
            compress: Scope::parse(params.text("COMPRESS")),
            multi_site: sites > 1 || (sites == 0 && !params.text("SITE").is_empty()),
            explicit: params.is_set("METHODS"),
            offer,
        })
    }

    /// The transforms a link to a peer on another host gets, in stack order.
    pub fn wanted(&self, same_site: bool) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.compress.applies(same_site) {
            v.push("compress");
        }
        if self.encrypt.applies(same_site) {
            v.push("encrypt");
        }
        v
    }

    /// Whether connecting must look at where the peer runs.
    pub fn filters(&self) -> bool {
        !self.explicit && !self.sets().is_empty()
    }

    /// The non-empty transform sets this process may need.
    pub fn sets(&self) -> Vec<Vec<&'static str>> {
        let mut out: Vec<Vec<&'static str>> = Vec::new();
        let mut cases = vec![true];
        if self.multi_site {
            cases.push(false);
        }
        for same_site in cases {
            let w = self.wanted(same_site);
            if !w.is_empty() && !out.contains(&w) {
                out.push(w);
            }
        }
        if self.multi_site {
            for w in &self.offer {
                if !w.is_empty() && !out.contains(w) {
                    out.push(w.clone());
                }
            }
        }
        out
    }
}

/// Socket methods that transforms stack on.
const BASES: &[&str] = &["tcp", "udp"];

/// The stacks this process offers: those `GW_METHODS` names, else those
/// the policy may need over each base method in `methods`.
pub fn build_stacks(
    env: &MethodEnv,
    policy: &Policy,
    methods: &[Arc<dyn Method>],
) -> Result<Vec<Arc<dyn Method>>> {
    let mut specs: Vec<(Vec<&'static str>, String)> = Vec::new();
    if policy.explicit {
        for name in env.params.text("METHODS").split(',').map(str::trim) {
            let name = name.to_ascii_lowercase();
            if !name.contains('+') {
                continue;
            }
            let (ts, base) = super::parse_stack(&name).ok_or_else(|| Error::UnknownMethod {
                var: "GW_METHODS".into(),
                name: name.clone(),
                valid: format!(
                    "a base method after transforms in this order: {}",
                    registry()
                        .iter()
                        .map(|t| t.name)
                        .collect::<Vec<_>>()
                        .join("+")
                ),
            })?;
            specs.push((ts.iter().map(|t| t.name).collect(), base.to_string()));
        }
    } else {
        for set in policy.sets() {
            for m in methods.iter().filter(|m| BASES.contains(&m.name())) {
                specs.push((set.clone(), m.name().to_string()));
            }
        }
    }
    let mut out = Vec::new();
    for (set, base) in specs {
        let info = crate::method::registry()
            .iter()
            .find(|m| m.name == base && BASES.contains(&m.name))
            .ok_or_else(|| Error::UnknownMethod {
                var: "GW_METHODS".into(),
                name: base.clone(),
                valid: format!("transforms stack on {}", BASES.join(", ")),
            })?;
        let Some(inner) = (info.init)(env)? else {
            continue;
        };
        let mut stack = Vec::new();
        for t in &set {
            let t = registry()
                .iter()
                .find(|r| r.name == *t)
                .expect("sets name registered transforms");
            stack.push((t.init)(env)?);
        }
        out.push(Arc::new(TransformMethod::new(inner, stack)) as Arc<dyn Method>);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(e: Scope, c: Scope, multi: bool) -> Policy {
        Policy {
            encrypt: e,
            compress: c,
            multi_site: multi,
            explicit: false,
            offer: Vec::new(),
        }
    }

    #[test]
    fn defaults_encrypt_between_sites_only_and_never_compress() {
        let p = policy(Scope::Sites, Scope::Never, true);
        assert_eq!(p.wanted(false), vec!["encrypt"]);
        assert!(p.wanted(true).is_empty());
        assert_eq!(p.sets(), vec![vec!["encrypt"]]);
        // One site: nothing to build, nothing to filter.
        let p = policy(Scope::Sites, Scope::Never, false);
        assert!(p.sets().is_empty());
        assert!(!p.filters());
    }

    #[test]
    fn always_and_compress_stack_in_registry_order() {
        let p = policy(Scope::Always, Scope::Sites, true);
        assert_eq!(p.wanted(true), vec!["encrypt"]);
        assert_eq!(p.wanted(false), vec!["compress", "encrypt"]);
        assert_eq!(p.sets().len(), 2);
        let p = policy(Scope::Never, Scope::Never, true);
        assert!(p.sets().is_empty());
        // A site that sends in the clear still offers what others send with.
        let mut p = policy(Scope::Never, Scope::Never, true);
        p.offer = vec![vec!["encrypt"]];
        assert_eq!(p.sets(), vec![vec!["encrypt"]]);
        assert!(p.wanted(false).is_empty());
    }
}
