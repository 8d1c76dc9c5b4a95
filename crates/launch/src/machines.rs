//! The machines file of `gwrun -f MACHINES` (also `--hostfile`,
//! `--machinefile`): which hosts a job runs on, how many ranks each takes,
//! and how each *site* (a group of hosts) is started.
//!
//! ```text
//! # hosts before any section form the implicit site "default" (start=ssh)
//! node1:2                       # MPICH Hydra: host, host:N
//! node2 slots=4 max_slots=8     # Open MPI: host slots=N [max_slots=M]
//!
//! [site anl] start=ssh user=alice port=2222 ssh_options="-o ConnectTimeout=5"
//! anl1:4
//! anl2:4
//!
//! [site ncsa] start=slurm gateway=login.ncsa prefix=/opt/gridwire compress=zstd
//! login.ncsa
//! cn001 slots=16
//! ```
//!
//! The host lines are accepted as MPICH Hydra and Open MPI accept them, so a
//! file written for `mpiexec -f` or `mpirun --hostfile` works unchanged:
//!
//! - Hydra (`HYDU_parse_hostfile`, `HYDU_process_mfile_token`): the first word
//!   is `host` or `host:N` (1 slot when `N` is missing); further words
//!   `user=NAME` (per-host login name) and `binding=…` (refused here: gwrun
//!   binds with `--bind-to`). `#` starts a comment anywhere on a line.
//! - Open MPI (`hostfile.c`): `slots=N` and `max_slots=M`. `max_slots` below
//!   `slots` is an error; `max_slots` alone sets the slots too. We keep
//!   `max_slots` as Open MPI means it: a hard cap on the ranks of that host
//!   even under `--oversubscribe` (see `hostmap`). A host without a count has
//!   1 slot, as in Hydra (Open MPI would count its cores, which the front end
//!   cannot know before reaching the host).
//! - A host listed on several lines of one site gets the sum of the slots, as
//!   Hydra adds up `a:2` then `a:1` to 3 slots and Open MPI adds its `slots=`.
//!   Hydra only merges *adjacent* lines (`a`, `b`, `a` gives it two entries for
//!   `a`, thus two proxies on one machine); we merge all of them, because
//!   gwrun runs one proxy per host. The host keeps the place of its first line.
//!   The same host in two sites is an error.
//!
//! Section headers `[site NAME] key=value …` are gridwire's own; see
//! [`Site`] and docs/machines.md. Every error names the line (1-based) and
//! quotes the offending text; nothing in the file can make the parser panic
//! or allocate without bound (see the `MAX_*` limits).

mod syntax;

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::Path;

use syntax::{
    dotted_quad, host_name_problem, parse_count, parse_pairs, prefix_ok, quote, site_name_ok,
    split_ssh_options, strip_comment, user_name_ok, MAX_PATH_BYTES, MAX_SITE_NAME, MAX_USER_NAME,
};

/// At most this many distinct hosts.
pub const MAX_HOSTS: usize = 100_000;
/// At most this many host lines (duplicates included).
pub const MAX_HOST_LINES: usize = 1_000_000;
/// At most this many sites.
pub const MAX_SITES: usize = 10_000;
/// At most this many slots (or `max_slots`) per line, and per host in all.
pub const MAX_SLOTS: usize = 1_000_000;
/// At most this many bytes per line (comments included).
pub const MAX_LINE_BYTES: usize = 4096;
/// At most this many bytes in the file ([`Machines::load`]).
pub const MAX_FILE_BYTES: u64 = 64 << 20;
/// The name of the site of the hosts before the first `[site …]` line.
pub const IMPLICIT_SITE: &str = "default";

/// How the proxies of a site are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartKind {
    /// One `ssh` per host (or a tree of them, the lead's choice).
    Ssh,
    /// `srun`, one proxy per node, inside the current Slurm allocation.
    Slurm,
    /// Forked by the front end on this machine.
    Local,
}

impl StartKind {
    /// The word used in the file: `ssh`, `slurm`, `local`.
    pub fn as_str(self) -> &'static str {
        match self {
            StartKind::Ssh => "ssh",
            StartKind::Slurm => "slurm",
            StartKind::Local => "local",
        }
    }

    fn parse(s: &str) -> Option<StartKind> {
        match s {
            "ssh" => Some(StartKind::Ssh),
            "slurm" => Some(StartKind::Slurm),
            "local" => Some(StartKind::Local),
            _ => None,
        }
    }
}

impl fmt::Display for StartKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A site: a `[site NAME]` section, or the implicit site of the hosts before
/// the first section (named [`IMPLICIT_SITE`], `start=ssh`, `line` 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// `[A-Za-z0-9_.-]{1,64}`.
    pub name: String,
    /// `start=ssh|slurm|local`; `ssh` when not given.
    pub start: StartKind,
    /// `user=NAME`: the ssh login name (`ssh -l`). A host's own `user=`
    /// overrides it.
    pub user: Option<String>,
    /// `port=N`: the ssh port (1–65535).
    pub port: Option<u16>,
    /// `ssh_options="…"`: extra ssh arguments, already split into words
    /// (inside the double quotes, single quotes group a word with spaces).
    /// Only ssh options and their arguments are accepted: a stray word would
    /// be taken by ssh for the destination host.
    pub ssh_options: Vec<String>,
    /// `gateway=HOST`: the one host of the site reachable from outside it;
    /// always one of the site's own hosts (checked).
    pub gateway: Option<String>,
    /// `prefix=/abs/path`: where gridwire is installed on the site's hosts
    /// (`PREFIX/bin/gwrun`). Only characters that need no quoting in a remote
    /// shell command: `A-Za-z0-9 _ . / + - @ % ~ ,`.
    pub prefix: Option<String>,
    /// `encrypt=yes|no`: encrypt traffic that leaves the site (stored as given).
    pub encrypt: Option<String>,
    /// `compress=yes|no|zstd|lz4`: compress traffic that leaves the site.
    pub compress: Option<String>,
    /// The line of the `[site …]` header; 0 for the implicit site.
    pub line: usize,
}

impl Site {
    fn new(name: &str, line: usize) -> Site {
        Site {
            name: name.to_string(),
            start: StartKind::Ssh,
            user: None,
            port: None,
            ssh_options: Vec::new(),
            gateway: None,
            prefix: None,
            encrypt: None,
            compress: None,
            line,
        }
    }
}

/// One host, all of its lines merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSpec {
    /// As first written (names compare without regard to case, as DNS does).
    pub name: String,
    /// Slots given (`host:N`, `slots=N`, or `max_slots=M` alone); `None`
    /// when the host has a single line that gives none. See
    /// [`HostSpec::effective_slots`].
    pub slots: Option<usize>,
    /// Open MPI's `max_slots`: no more ranks than this even when
    /// oversubscribing. For a host on several lines, the sum of the lines'
    /// caps, or `None` (no cap) as soon as one line has none.
    pub max_slots: Option<usize>,
    /// Hydra's per-host `user=NAME`; overrides the site's `user`.
    pub user: Option<String>,
    /// Index into [`Machines::sites`].
    pub site: usize,
    /// The host's first line.
    pub line: usize,
}

impl HostSpec {
    /// The slots placement uses: the given count, 1 when none is given (as
    /// Hydra does).
    pub fn effective_slots(&self) -> usize {
        self.slots.unwrap_or(1)
    }
}

/// A parsed machines file: sites in file order (the implicit site first,
/// when there is one), hosts in the order of their first line. Every site
/// has at least one host, and there is at least one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machines {
    pub sites: Vec<Site>,
    pub hosts: Vec<HostSpec>,
}

/// A problem in a machines file. `line` is 1-based; 0 for a problem of the
/// whole file (no hosts, unreadable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachinesError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for MachinesError {
    /// `line N: message`, or just the message when `line` is 0.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            f.write_str(&self.message)
        } else {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }
}

impl std::error::Error for MachinesError {}

fn err<T>(line: usize, message: String) -> Result<T, MachinesError> {
    Err(MachinesError { line, message })
}

impl Machines {
    /// Parses a machines file. See the module documentation for the format.
    pub fn parse(text: &str) -> Result<Machines, MachinesError> {
        let mut p = Parser::default();
        for (i, raw) in text.lines().enumerate() {
            p.line(i + 1, raw)?;
        }
        p.finish()
    }

    /// [`Machines::parse`] of bytes that may not be UTF-8: the error names
    /// the first line that is not.
    pub fn parse_bytes(bytes: &[u8]) -> Result<Machines, MachinesError> {
        match std::str::from_utf8(bytes) {
            Ok(text) => Machines::parse(text),
            Err(e) => {
                let before = bytes.get(..e.valid_up_to()).unwrap_or_default();
                let line = 1 + before.iter().filter(|&&b| b == b'\n').count();
                err(line, "not UTF-8 text".into())
            }
        }
    }

    /// Reads and parses the file at `path` (at most [`MAX_FILE_BYTES`]).
    /// The error starts with the path: `PATH: line N: message`.
    pub fn load(path: &Path) -> Result<Machines, String> {
        let shown = path.display();
        let file = std::fs::File::open(path)
            .map_err(|e| format!("machines file {shown}: cannot open: {e}"))?;
        let mut bytes = Vec::new();
        file.take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("machines file {shown}: cannot read: {e}"))?;
        if bytes.len() as u64 > MAX_FILE_BYTES {
            return Err(format!(
                "machines file {shown}: larger than {MAX_FILE_BYTES} bytes"
            ));
        }
        Machines::parse_bytes(&bytes).map_err(|e| format!("machines file {shown}: {e}"))
    }

    /// The hosts of site `site`, with their indices into [`Machines::hosts`].
    pub fn hosts_of(&self, site: usize) -> impl Iterator<Item = (usize, &HostSpec)> {
        self.hosts
            .iter()
            .enumerate()
            .filter(move |(_, h)| h.site == site)
    }

    /// The host indices of every site, in one pass (`hosts_by_site()[s]`
    /// lists the hosts of site `s` in file order).
    pub fn hosts_by_site(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); self.sites.len()];
        for (i, h) in self.hosts.iter().enumerate() {
            if let Some(list) = out.get_mut(h.site) {
                list.push(i);
            }
        }
        out
    }

    /// The index of the site named `name`.
    pub fn site_index(&self, name: &str) -> Option<usize> {
        self.sites.iter().position(|s| s.name == name)
    }

    /// The index of host `name` (compared without regard to case).
    pub fn host_index(&self, name: &str) -> Option<usize> {
        self.hosts
            .iter()
            .position(|h| h.name.eq_ignore_ascii_case(name))
    }

    /// The sum of [`HostSpec::effective_slots`] (saturating; at most
    /// `MAX_HOSTS * MAX_SLOTS` anyway).
    pub fn total_slots(&self) -> usize {
        self.hosts
            .iter()
            .fold(0usize, |acc, h| acc.saturating_add(h.effective_slots()))
    }

    /// The ssh login name for host `host`: its own `user=`, else its site's.
    pub fn user_of(&self, host: usize) -> Option<&str> {
        let h = self.hosts.get(host)?;
        h.user
            .as_deref()
            .or_else(|| self.sites.get(h.site)?.user.as_deref())
    }
}

/// True when `name` names the machine this runs on: `localhost` (also
/// `localhost.localdomain` and `*.localhost`, RFC 6761), an IPv4 loopback
/// address `127.*`, `::1`, or this machine's host name (`gethostname`,
/// case-insensitive; `node1` also matches `node1.example.org` and the other
/// way round). The lead starts such hosts of the implicit site locally rather
/// than by ssh, as Hydra does.
pub fn is_this_machine(name: &str) -> bool {
    is_this_machine_named(name, this_host_name().as_deref())
}

/// [`is_this_machine`] with the machine's host name given (`None`: unknown).
pub fn is_this_machine_named(name: &str, hostname: Option<&str>) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    if name == "localhost" || name == "localhost.localdomain" || name.ends_with(".localhost") {
        return true;
    }
    if name == "::1" || name == "[::1]" {
        return true;
    }
    if let Some(octets) = dotted_quad(&name) {
        return octets[0] == 127;
    }
    let Some(hostname) = hostname else {
        return false;
    };
    let hostname = hostname
        .strip_suffix('.')
        .unwrap_or(hostname)
        .to_ascii_lowercase();
    if hostname.is_empty() {
        return false;
    }
    if name == hostname {
        return true;
    }
    // One of the two is unqualified and equals the other's first label.
    let short = |s: &str| s.split('.').next().unwrap_or("").to_string();
    (!name.contains('.') && name == short(&hostname))
        || (!hostname.contains('.') && hostname == short(&name))
}

/// This machine's host name (its UTS namespace's), if it can be read.
fn this_host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the pointer and length describe `buf`, which outlives the call;
    // gethostname writes at most `len` bytes into it.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    // POSIX leaves truncated names unterminated: take up to the first NUL or
    // the whole buffer.
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    std::str::from_utf8(buf.get(..end)?)
        .ok()
        .map(str::to_string)
}

/// One host line's contribution before merging.
struct HostLine {
    name: String,
    slots: Option<usize>,
    max_slots: Option<usize>,
    user: Option<String>,
}

#[derive(Default)]
struct Parser {
    sites: Vec<Site>,
    hosts: Vec<HostSpec>,
    /// Site name → index.
    site_index: HashMap<String, usize>,
    /// Lower-cased host name → index.
    host_index: HashMap<String, usize>,
    /// The site host lines go to: the last `[site]` header's, or the
    /// implicit site (made by the first host line before any header).
    current: Option<usize>,
    host_lines: usize,
}

impl Parser {
    fn line(&mut self, lineno: usize, raw: &str) -> Result<(), MachinesError> {
        if raw.len() > MAX_LINE_BYTES {
            return err(
                lineno,
                format!(
                    "line longer than {MAX_LINE_BYTES} bytes ({} bytes, starting {})",
                    raw.len(),
                    quote(raw)
                ),
            );
        }
        let text = strip_comment(raw).trim();
        if text.is_empty() {
            return Ok(());
        }
        if text.starts_with('[') {
            self.header(lineno, text)
        } else {
            self.host(lineno, text)
        }
    }

    /// `[site NAME] key=value …`.
    fn header(&mut self, lineno: usize, text: &str) -> Result<(), MachinesError> {
        let Some(close) = text.find(']') else {
            return err(lineno, format!("missing ']' in {}", quote(text)));
        };
        let inside = text.get(1..close).unwrap_or("");
        let rest = text.get(close + 1..).unwrap_or("");
        let words: Vec<&str> = inside.split_whitespace().collect();
        let name = match words.as_slice() {
            ["site", name] => *name,
            _ if inside.contains(':') => {
                return err(
                    lineno,
                    format!(
                        "{}: IPv6 addresses are not accepted (use a host name)",
                        quote(text.get(..=close).unwrap_or(text))
                    ),
                )
            }
            _ => {
                return err(
                    lineno,
                    format!(
                        "expected a section header [site NAME], found {}",
                        quote(text.get(..=close).unwrap_or(text))
                    ),
                )
            }
        };
        if !site_name_ok(name) {
            return err(
                lineno,
                format!(
                    "bad site name {}: use 1 to {MAX_SITE_NAME} letters, digits, '_', '.' or '-'",
                    quote(name)
                ),
            );
        }
        if let Some(&other) = self.site_index.get(name) {
            let where_ = match self.sites.get(other).map(|s| s.line) {
                Some(0) | None => {
                    "it is the implicit site of the hosts before the first [site] line".to_string()
                }
                Some(l) => format!("it is already defined on line {l}"),
            };
            return err(lineno, format!("site {}: {where_}", quote(name)));
        }
        if self.sites.len() >= MAX_SITES {
            return err(lineno, format!("more than {MAX_SITES} sites"));
        }
        let mut site = Site::new(name, lineno);
        let pairs = parse_pairs(rest).map_err(|m| MachinesError {
            line: lineno,
            message: format!("site {}: {m}", quote(name)),
        })?;
        let mut seen: Vec<&str> = Vec::new();
        for pair in &pairs {
            let bad = |what: String| MachinesError {
                line: lineno,
                message: format!("site {}: {what}", quote(name)),
            };
            let key = pair.key.as_str();
            let value = pair.value.as_str();
            if seen.contains(&key) {
                return Err(bad(format!("{key}= given twice")));
            }
            seen.push(key);
            match key {
                "start" => {
                    site.start = StartKind::parse(value).ok_or_else(|| {
                        bad(format!(
                            "start={}: expected ssh, slurm or local",
                            quote(value)
                        ))
                    })?
                }
                "user" => {
                    if !user_name_ok(value) {
                        return Err(bad(format!(
                            "bad user name {}: letters, digits, '_', '.', '-' (not first), at most {MAX_USER_NAME}",
                            quote(value)
                        )));
                    }
                    site.user = Some(value.to_string());
                }
                "port" => {
                    let port = value
                        .parse::<u16>()
                        .ok()
                        .filter(|&p| p != 0 && value.bytes().all(|b| b.is_ascii_digit()))
                        .ok_or_else(|| bad(format!("port={}: expected 1 to 65535", quote(value))))?;
                    site.port = Some(port);
                }
                "ssh_options" => site.ssh_options = split_ssh_options(value).map_err(bad)?,
                "gateway" => {
                    if let Some(why) = host_name_problem(value) {
                        return Err(bad(format!("gateway={}: {why}", quote(value))));
                    }
                    site.gateway = Some(value.to_string());
                }
                "prefix" => {
                    if !prefix_ok(value) {
                        return Err(bad(format!(
                            "prefix={}: expected an absolute path of letters, digits and _ . / + - @ % ~ , (at most {MAX_PATH_BYTES} bytes)",
                            quote(value)
                        )));
                    }
                    site.prefix = Some(value.to_string());
                }
                "encrypt" => {
                    if !matches!(value, "yes" | "no") {
                        return Err(bad(format!("encrypt={}: expected yes or no", quote(value))));
                    }
                    site.encrypt = Some(value.to_string());
                }
                "compress" => {
                    if !matches!(value, "yes" | "no" | "zstd" | "lz4") {
                        return Err(bad(format!(
                            "compress={}: expected yes, no, zstd or lz4",
                            quote(value)
                        )));
                    }
                    site.compress = Some(value.to_string());
                }
                _ => {
                    return Err(bad(format!(
                        "unknown key {}: expected start, user, port, ssh_options, gateway, prefix, encrypt or compress",
                        quote(key)
                    )))
                }
            }
        }
        let index = self.sites.len();
        self.site_index.insert(name.to_string(), index);
        self.sites.push(site);
        self.current = Some(index);
        Ok(())
    }

    /// `host`, `host:N`, `host slots=N [max_slots=M] [user=NAME]`.
    fn host(&mut self, lineno: usize, text: &str) -> Result<(), MachinesError> {
        let bad = |m: String| MachinesError {
            line: lineno,
            message: m,
        };
        let (first, rest) = match text.find(char::is_whitespace) {
            Some(i) => (text.get(..i).unwrap_or(text), text.get(i..).unwrap_or("")),
            None => (text, ""),
        };
        if first.contains('=') {
            return Err(bad(format!(
                "expected a host name first, found {}",
                quote(first)
            )));
        }
        let (name, count) = match first.split_once(':') {
            Some((name, count)) if !count.contains(':') && !name.is_empty() => (name, Some(count)),
            Some(_) if first.starts_with('[') || first.matches(':').count() > 1 => {
                return Err(bad(format!(
                    "{}: IPv6 addresses are not accepted (use a host name)",
                    quote(first)
                )))
            }
            Some(_) => {
                return Err(bad(format!(
                    "expected host or host:N, found {}",
                    quote(first)
                )))
            }
            None => (first, None),
        };
        if let Some(why) = host_name_problem(name) {
            return Err(bad(format!("{}: {why}", quote(name))));
        }
        let mut slots = match count {
            Some(c) => Some(
                parse_count(c)
                    .map_err(|m| bad(format!("bad slot count in {}: {m}", quote(first))))?,
            ),
            None => None,
        };
        let mut max_slots = None;
        let mut user = None;
        let pairs = parse_pairs(rest).map_err(|m| bad(format!("host {}: {m}", quote(name))))?;
        let mut seen: Vec<&str> = Vec::new();
        for pair in &pairs {
            let key = pair.key.as_str();
            let value = pair.value.as_str();
            if seen.contains(&key) {
                return Err(bad(format!("host {}: {key}= given twice", quote(name))));
            }
            seen.push(key);
            match key {
                "slots" => {
                    if slots.is_some() {
                        return Err(bad(format!(
                            "host {}: slots given twice ({} and slots=)",
                            quote(name),
                            quote(first)
                        )));
                    }
                    slots = Some(parse_count(value).map_err(|m| {
                        bad(format!(
                            "host {}: bad slots={}: {m}",
                            quote(name),
                            quote(value)
                        ))
                    })?);
                }
                "max_slots" => {
                    max_slots = Some(parse_count(value).map_err(|m| {
                        bad(format!(
                            "host {}: bad max_slots={}: {m}",
                            quote(name),
                            quote(value)
                        ))
                    })?);
                }
                "user" => {
                    if !user_name_ok(value) {
                        return Err(bad(format!(
                            "host {}: bad user name {}",
                            quote(name),
                            quote(value)
                        )));
                    }
                    user = Some(value.to_string());
                }
                "binding" => {
                    return Err(bad(format!(
                        "host {}: Hydra's per-host binding= is not supported (use gwrun --bind-to)",
                        quote(name)
                    )))
                }
                _ => {
                    return Err(bad(format!(
                        "host {}: unknown key {} (expected slots=, max_slots= or user=)",
                        quote(name),
                        quote(key)
                    )))
                }
            }
        }
        // Open MPI: max_slots below slots is an error; max_slots alone sets
        // the slots.
        match (slots, max_slots) {
            (Some(s), Some(m)) if m < s => {
                return Err(bad(format!(
                    "host {}: max_slots={m} is less than its {s} slots",
                    quote(name)
                )))
            }
            (None, Some(m)) => slots = Some(m),
            _ => {}
        }
        self.add_host(
            lineno,
            HostLine {
                name: name.to_string(),
                slots,
                max_slots,
                user,
            },
        )
    }

    fn add_host(&mut self, lineno: usize, h: HostLine) -> Result<(), MachinesError> {
        self.host_lines += 1;
        if self.host_lines > MAX_HOST_LINES {
            return err(lineno, format!("more than {MAX_HOST_LINES} host lines"));
        }
        let site = match self.current {
            Some(s) => s,
            None => {
                // The first host before any header: the implicit site.
                let index = self.sites.len();
                self.sites.push(Site::new(IMPLICIT_SITE, 0));
                self.site_index.insert(IMPLICIT_SITE.to_string(), index);
                self.current = Some(index);
                index
            }
        };
        let key = h.name.to_ascii_lowercase();
        let Some(&index) = self.host_index.get(&key) else {
            if self.hosts.len() >= MAX_HOSTS {
                return err(lineno, format!("more than {MAX_HOSTS} hosts"));
            }
            self.host_index.insert(key, self.hosts.len());
            self.hosts.push(HostSpec {
                name: h.name,
                slots: h.slots,
                max_slots: h.max_slots,
                user: h.user,
                site,
                line: lineno,
            });
            return Ok(());
        };
        let site_name = |s: usize| {
            self.sites
                .get(s)
                .map(|s| s.name.as_str())
                .unwrap_or("?")
                .to_string()
        };
        let Some(old) = self.hosts.get(index) else {
            return err(lineno, "internal error: host index out of range".into());
        };
        if old.site != site {
            return err(
                lineno,
                format!(
                    "host {} is already in site {} (line {}); a host belongs to one site",
                    quote(&h.name),
                    quote(&site_name(old.site)),
                    old.line
                ),
            );
        }
        // Hydra adds the counts of repeated lines (a missing count is 1).
        let line_slots = h.slots.unwrap_or(1);
        let sum = old
            .effective_slots()
            .checked_add(line_slots)
            .filter(|&s| s <= MAX_SLOTS)
            .ok_or_else(|| MachinesError {
                line: lineno,
                message: format!(
                    "host {}: more than {MAX_SLOTS} slots over all of its lines",
                    quote(&h.name)
                ),
            })?;
        // The caps add up too; a line without one lifts the cap.
        let max_slots = match (old.max_slots, h.max_slots) {
            (Some(a), Some(b)) => a.checked_add(b),
            _ => None,
        };
        let user = match (&old.user, h.user) {
            (Some(a), Some(b)) if *a != b => {
                return err(
                    lineno,
                    format!(
                        "host {}: user={} here but user={} on line {}",
                        quote(&h.name),
                        quote(&b),
                        quote(a),
                        old.line
                    ),
                )
            }
            (Some(a), _) => Some(a.clone()),
            (None, b) => b,
        };
        if let Some(old) = self.hosts.get_mut(index) {
            old.slots = Some(sum);
            old.max_slots = max_slots;
            old.user = user;
        }
        Ok(())
    }

    fn finish(self) -> Result<Machines, MachinesError> {
        if self.hosts.is_empty() {
            return err(0, "the machines file names no hosts".into());
        }
        // One pass over the hosts, not one per site: a hostile file may hold
        // MAX_SITES sites and MAX_HOSTS hosts.
        let mut per_site = vec![0usize; self.sites.len()];
        for h in &self.hosts {
            if let Some(c) = per_site.get_mut(h.site) {
                *c += 1;
            }
        }
        for (index, site) in self.sites.iter().enumerate() {
            if per_site.get(index).copied().unwrap_or(0) == 0 {
                return err(
                    site.line,
                    format!(
                        "site {} has no hosts (host lines follow the [site] line)",
                        quote(&site.name)
                    ),
                );
            }
            let Some(gw) = &site.gateway else { continue };
            let gw_site = self
                .host_index
                .get(&gw.to_ascii_lowercase())
                .and_then(|&h| self.hosts.get(h))
                .map(|h| h.site);
            if gw_site != Some(index) {
                let names: Vec<&str> = self
                    .hosts
                    .iter()
                    .filter(|h| h.site == index)
                    .map(|h| h.name.as_str())
                    .take(6)
                    .collect();
                let shown = names.iter().take(5).copied().collect::<Vec<_>>().join(", ");
                let more = if names.len() > 5 { ", …" } else { "" };
                return err(
                    site.line,
                    format!(
                        "site {}: gateway={} is not a host of the site (its hosts: {shown}{more})",
                        quote(&site.name),
                        quote(gw),
                    ),
                );
            }
        }
        Ok(Machines {
            sites: self.sites,
            hosts: self.hosts,
        })
    }
}

#[cfg(test)]
mod tests;
