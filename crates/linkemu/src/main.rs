//! `gw-linkemu`: an impaired point-to-point link between two network
//! namespaces, emulated in user space.
//!
//! This machine's kernel has no `netem` qdisc, so delay, jitter,
//! reordering, duplication and rate limits cannot be had from `tc`. Instead
//! a TUN device is created inside each namespace (`gwemu0` by default, one
//! address each), and this process copies IP packets between the two
//! devices through [`impair::Direction`] queues — one per direction — that
//! apply the impairments. Packets written to the peer's TUN device are
//! delivered by its kernel exactly as if they had come off a wire.
//!
//! ```text
//! ns A: 10.77.0.1/24 gwemu0 <-> [gw-linkemu: A->B queue, B->A queue] <-> gwemu0 10.77.0.2/24 :ns B
//! ```
//!
//! It prints `READY` on stdout once both devices are up, runs until SIGINT
//! or SIGTERM (or `--duration`), then prints per-direction statistics on
//! stderr. With `--create-ns` it also creates the namespaces and deletes
//! them at exit. Needs root (CAP_NET_ADMIN) and `ip`.

mod impair;

use clap::Parser;
use impair::{parse_duration, parse_percent, parse_rate, Direction, Impairments};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "gw-linkemu",
    about = "Join two network namespaces through TUN devices and impair the link in user space",
    after_help = "Example:\n  ip netns add a; ip netns add b\n  gw-linkemu --ns-a a --ns-b b --delay 10ms --jitter 1ms --loss 1 --reorder 5 --rate 100mbit\n  ip netns exec a ping 10.77.0.2"
)]
struct Cli {
    /// First namespace (a name under /run/netns).
    #[arg(long)]
    ns_a: String,
    /// Second namespace.
    #[arg(long)]
    ns_b: String,
    /// Create both namespaces (with loopback up) and delete them at exit.
    #[arg(long)]
    create_ns: bool,
    /// Address/prefix of the device in namespace A.
    #[arg(long, default_value = "10.77.0.1/24")]
    addr_a: String,
    /// Address/prefix of the device in namespace B.
    #[arg(long, default_value = "10.77.0.2/24")]
    addr_b: String,
    /// TUN device name (the same in both namespaces).
    #[arg(long, default_value = "gwemu0")]
    dev: String,
    #[arg(long, default_value = "1500")]
    mtu: u32,
    /// One-way delay per direction (e.g. 10ms).
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    delay: Duration,
    /// Uniform jitter added to the delay (+-).
    #[arg(long, default_value = "0", value_parser = parse_duration)]
    jitter: Duration,
    /// Percentage of packets dropped at random.
    #[arg(long, default_value = "0", value_parser = parse_percent)]
    loss: f64,
    /// Percentage of packets duplicated.
    #[arg(long, default_value = "0", value_parser = parse_percent)]
    dup: f64,
    /// Percentage of packets sent without the delay (they overtake others).
    #[arg(long, default_value = "0", value_parser = parse_percent)]
    reorder: f64,
    /// Rate limit per direction (100mbit, 1gbit, 10mbps; 0 = unlimited).
    #[arg(long, default_value = "0", value_parser = parse_rate)]
    rate: u64,
    /// Longest backlog of the rate limiter before it drops (tail drop).
    #[arg(long, default_value = "50ms", value_parser = parse_duration)]
    queue: Duration,
    /// Seed of the impairment decisions (reproducible runs).
    #[arg(long, default_value = "1")]
    seed: u64,
    /// Exit after this long (default: run until SIGINT/SIGTERM).
    #[arg(long, value_parser = parse_duration)]
    duration: Option<Duration>,
}

/// Waits shorter than this spin (a sleep costs a few microseconds of wake-up latency).
const SPIN_BELOW: Duration = Duration::from_micros(20);

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

fn open_ns(path: &str) -> Result<OwnedFd, String> {
    let c = std::ffi::CString::new(path).map_err(|_| "bad path".to_string())?;
    // SAFETY: `c` is a valid NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(format!("open {path}: {}", io::Error::last_os_error()));
    }
    // SAFETY: `fd` is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setns(fd: RawFd, what: &str) -> Result<(), String> {
    // SAFETY: setns takes a descriptor and a flag; it affects this thread only.
    if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
        return Err(format!("setns {what}: {}", io::Error::last_os_error()));
    }
    Ok(())
}

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

/// Creates TUN device `dev` inside namespace `ns` (by entering it with this
/// thread and coming back), configures it with `ip -n`, and returns its fd.
fn tun_in(ns: &str, dev: &str, addr: &str, mtu: u32, home: &OwnedFd) -> Result<OwnedFd, String> {
    let target = open_ns(&format!("/run/netns/{ns}"))?;
    setns(target.as_raw_fd(), ns)?;
    let made = (|| {
        // SAFETY: a plain open of a device path; the result is checked.
        let fd = unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(format!("open /dev/net/tun: {}", io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a fresh descriptor we own.
        let tun = unsafe { OwnedFd::from_raw_fd(fd) };
        // struct ifreq: 16-byte name, then the flags (short) in a 24-byte union.
        let mut ifr = [0u8; 40];
        let name = dev.as_bytes();
        if name.is_empty() || name.len() > 15 {
            return Err(format!("device name {dev:?} must be 1..15 bytes"));
        }
        ifr[..name.len()].copy_from_slice(name);
        let flags = (libc::IFF_TUN | libc::IFF_NO_PI) as u16;
        ifr[16..18].copy_from_slice(&flags.to_ne_bytes());
        // SAFETY: TUNSETIFF reads and writes a struct ifreq; `ifr` is a live
        // 40-byte buffer laid out as one.
        if unsafe { libc::ioctl(tun.as_raw_fd(), TUNSETIFF as _, ifr.as_mut_ptr()) } < 0 {
            return Err(format!("TUNSETIFF {dev}: {}", io::Error::last_os_error()));
        }
        Ok(tun)
    })();
    setns(home.as_raw_fd(), "back to the original namespace")?;
    let tun = made?;
    ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
    ip(&["-n", ns, "link", "set", dev, "mtu", &mtu.to_string(), "up"])?;
    Ok(tun)
}

fn main() {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("gw-linkemu: {e}");
            if cli.create_ns {
                let _ = ip(&["netns", "del", &cli.ns_a]);
                let _ = ip(&["netns", "del", &cli.ns_b]);
            }
            std::process::exit(1);
        }
    }
}

fn run(cli: &Cli) -> Result<(), String> {
    // SAFETY: installs a handler that only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    // SAFETY: PR_SET_TIMERSLACK takes an integer; it only affects this thread's timers.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    if cli.create_ns {
        for ns in [&cli.ns_a, &cli.ns_b] {
            ip(&["netns", "add", ns])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
    }
    let home = open_ns("/proc/self/ns/net")?;
    let ta = tun_in(&cli.ns_a, &cli.dev, &cli.addr_a, cli.mtu, &home)?;
    let tb = tun_in(&cli.ns_b, &cli.dev, &cli.addr_b, cli.mtu, &home)?;
    let imp = Impairments {
        delay: cli.delay,
        jitter: cli.jitter,
        loss: cli.loss,
        dup: cli.dup,
        reorder: cli.reorder,
        rate_bps: cli.rate,
        queue: cli.queue,
    };
    // Index 0: A->B, 1: B->A; independent random streams.
    let mut dirs = [
        Direction::new(imp, cli.seed),
        Direction::new(imp, cli.seed ^ 0x5555_5555_5555_5555),
    ];
    let fds = [ta.as_raw_fd(), tb.as_raw_fd()];
    println!(
        "READY {} {} <-> {} {} {imp:?}",
        cli.ns_a, cli.addr_a, cli.ns_b, cli.addr_b
    );
    let _ = io::Write::flush(&mut io::stdout());
    let end = cli.duration.map(|d| Instant::now() + d);
    let mut buf = vec![0u8; 65536];
    let mut write_errors = 0u64;
    while !STOP.load(Ordering::Relaxed) && end.is_none_or(|e| Instant::now() < e) {
        let now = Instant::now();
        // Wait for input or the next due packet (at most 100 ms, to see STOP).
        let mut timeout = Duration::from_millis(100);
        for d in &dirs {
            if let Some(t) = d.next_due() {
                timeout = timeout.min(t.saturating_duration_since(now));
            }
        }
        let mut pfd = [
            libc::pollfd {
                fd: fds[0],
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: fds[1],
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // A precise sleep (ppoll takes nanoseconds; the timer slack is set
        // to 1 ns at start), so the emulator does not spin for sub-millisecond
        // waits and leaves the CPU to the processes it connects; only waits
        // under SPIN_BELOW spin.
        let ts = if timeout < SPIN_BELOW {
            libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            }
        } else {
            libc::timespec {
                tv_sec: timeout.as_secs() as libc::time_t,
                tv_nsec: timeout.subsec_nanos() as libc::c_long,
            }
        };
        // SAFETY: `pfd` is a live array of two pollfd; `ts` a live timespec;
        // no signal mask is passed.
        unsafe { libc::ppoll(pfd.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        for (i, &fd) in fds.iter().enumerate() {
            // Drain what is readable (bounded, so the other side is served too).
            for _ in 0..256 {
                // SAFETY: `buf` is a live writable buffer of the length passed.
                let n = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
                if n <= 0 {
                    break;
                }
                dirs[i].push(Instant::now(), buf[..n as usize].to_vec());
            }
        }
        let now = Instant::now();
        for (i, d) in dirs.iter_mut().enumerate() {
            let out = fds[1 - i];
            while let Some(p) = d.pop_due(now) {
                // SAFETY: writes one packet from a live buffer to the peer's TUN device.
                let n = unsafe { libc::write(out, p.as_ptr() as *const libc::c_void, p.len()) };
                if n < 0 {
                    write_errors += 1;
                }
            }
        }
    }
    for (name, d) in ["A->B", "B->A"].iter().zip(&dirs) {
        eprintln!("gw-linkemu: {name} {:?}", d.stats);
    }
    if write_errors > 0 {
        eprintln!("gw-linkemu: {write_errors} packets could not be written to a TUN device");
    }
    drop((ta, tb));
    if cli.create_ns {
        let _ = ip(&["netns", "del", &cli.ns_a]);
        let _ = ip(&["netns", "del", &cli.ns_b]);
    }
    Ok(())
}
