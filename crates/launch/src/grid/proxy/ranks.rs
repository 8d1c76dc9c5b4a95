//! The proxy's own ranks: forking them, their PMI and output streams,
//! rank 0's stdin, signals and exits.

use super::*;

/// What [`Proxy::spawn`] starts.
pub(super) struct ProcSpec<'a> {
    pub rank: usize,
    /// Its index among its world's processes on this host, and their number.
    pub local: usize,
    pub nlocal: usize,
    pub program: &'a std::path::Path,
    pub args: &'a [String],
    /// Its world: (first id, size).
    pub world: (usize, usize),
    /// What a spawn adds (`PMI_SPAWNED`, `GW_PARENT`, `GW_APPNUM`).
    pub extra_env: Vec<(String, String)>,
    /// The `wdir` info key's directory.
    pub wdir: Option<&'a str>,
}

impl Proxy {
    /// Forks one process of the job: a first-world rank or a spawned one
    /// (same environment and PMI, plus what `p` adds).
    pub(super) fn spawn(&mut self, p: ProcSpec<'_>) -> Result<i32, (i32, String)> {
        let ProcSpec {
            rank: r,
            local,
            nlocal,
            program,
            args,
            world: (first, count),
            extra_env,
            wdir: wdir_override,
        } = p;
        let plan = &self.hello.plan;
        let host = &plan.hosts[self.hello.host].name;
        let (ours, theirs) =
            sys::socketpair().map_err(|e| (1, format!("socketpair for rank {r}: {e}")))?;
        let child_fd = theirs.as_raw_fd();
        let mut cmd = Command::new(program);
        cmd.args(args);
        for v in [
            "PMI_ID",
            "PMI_PORT",
            "PMI_HOSTNAME",
            "PMI_SPAWNED",
            "HYDI_CONTROL_FD",
            "GW_HOST_ID",
        ] {
            cmd.env_remove(v);
        }
        for (k, v) in &plan.env {
            cmd.env(k, v);
        }
        if let Some(site) = plan.sites.get(plan.hosts[self.hello.host].site) {
            for (k, v) in &site.env {
                cmd.env(k, v);
            }
        }
        if let Some(dir) = self.stage.library_dir() {
            let old = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
            let v = if old.is_empty() {
                dir.display().to_string()
            } else {
                format!("{}:{old}", dir.display())
            };
            cmd.env("LD_LIBRARY_PATH", v);
        }
        if let Some(i) = &plan.iface {
            cmd.env("GW_IFACE", i);
        }
        cmd.env("PMI_FD", child_fd.to_string())
            .env("PMI_RANK", r.to_string())
            .env("PMI_SIZE", (first + count).to_string())
            .env(
                "GW_WORLD",
                format!("{first}:{count}:{}", plan.capacity.max(plan.n)),
            )
            .envs(extra_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env("MPI_LOCALRANKID", local.to_string())
            .env("MPI_LOCALNRANKS", nlocal.to_string())
            .env("GW_JOB_SECRET", &self.hello.secret)
            .env("GW_JOB_ID", &plan.job_id)
            // Where the rank runs, as the machines file names it (`gwinfo -f`).
            .env("GW_HOST_NAME", host)
            .env(
                "GW_SITE",
                plan.sites
                    .get(plan.hosts[self.hello.host].site)
                    .map_or("?", |s| s.name.as_str()),
            );
        // The front end's directory if this host has it (a shared file
        // system), else the home directory, as Open MPI does.
        let wdir = wdir_override
            .or(plan.wdir.as_deref())
            .filter(|d| std::path::Path::new(d).is_dir())
            .map(str::to_string)
            .or_else(|| std::env::var("HOME").ok())
            .unwrap_or_else(|| "/".into());
        cmd.current_dir(&wdir);
        // Rank 0 reads the front end's stdin (when it is not a terminal),
        // the others /dev/null.
        cmd.stdin(if r == 0 && first == 0 && plan.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.process_group(0);
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: between fork and exec only async-signal-safe calls:
        // fcntl(2) to let the PMI socket survive exec, prctl(2)/getppid(2)
        // so the rank dies with its proxy.
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(child_fd, libc::F_SETFD, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                sys::die_with_parent(parent)
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            let code = if e.kind() == io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            (
                code,
                format!(
                    "cannot execute '{}' on host {host}: {}",
                    program.display(),
                    sys::os_message(&e)
                ),
            )
        })?;
        drop(theirs);
        let pid = child.id() as i32;
        if let Some(pipe) = child.stdin.take().map(OwnedFd::from) {
            let _ = sys::set_nonblocking(pipe.as_raw_fd());
            self.stdin.pipe = Some(pipe);
            self.write_stdin();
        }
        let out = child.stdout.take().map(OwnedFd::from);
        let err = child.stderr.take().map(OwnedFd::from);
        drop(child);
        for fd in [&out, &err].into_iter().flatten() {
            let _ = sys::set_nonblocking(fd.as_raw_fd());
        }
        let _ = sys::set_nonblocking(ours.as_raw_fd());
        self.ranks.push(LocalRank {
            rank: r,
            pid,
            pmi: Some(ours),
            pmi_in: PmiStream::new(),
            pmi_out: Vec::new(),
            streams: [(out, Vec::new()), (err, Vec::new())],
            exit: None,
            inited: false,
            finalized: false,
        });
        Ok(pid)
    }

    pub(super) fn running(&self) -> usize {
        self.ranks.iter().filter(|r| r.exit.is_none()).count()
    }

    pub(super) fn all_finished(&self) -> bool {
        let ranks_over = if self.started {
            self.running() == 0
        } else {
            // Never started: over once there is nothing to wait for.
            self.term_sent.is_some() || self.orphaned.is_some()
        };
        ranks_over && self.children.iter().all(|c| c.finished())
    }

    pub(super) fn signal_ranks(&mut self, sig: libc::c_int) {
        for r in &self.ranks {
            sys::kill_group(r.pid, sig);
        }
        if sig == libc::SIGKILL {
            self.kill_sent = true;
        } else if self.term_sent.is_none() {
            self.term_sent = Some(Instant::now());
        }
    }

    /// Tears the host down: ranks and child proxies.
    pub(super) fn kill(&mut self, sig: libc::c_int) {
        self.signal_ranks(sig);
        if self.term_sent.is_none() {
            self.term_sent = Some(Instant::now());
        }
        for c in &mut self.children {
            c.channel.send_msg(Msg::Kill { signal: sig });
        }
    }

    pub(super) fn orphan(&mut self, why: String) {
        if self.orphaned.is_some() {
            return;
        }
        eprintln!(
            "gwrun proxy on {}: lost the front end ({why}); killing this host's ranks",
            self.host_name(self.hello.host)
        );
        self.orphaned = Some(why);
        self.kill(libc::SIGTERM);
        // Children see their channel close and do the same.
        for c in &mut self.children {
            c.channel.flush();
            c.channel.close();
        }
    }

    pub(super) fn deliver(&mut self, replies: Vec<(usize, String)>) {
        for (to, line) in replies {
            if let Some(i) = self.ranks.iter().position(|r| r.rank == to) {
                self.ranks[i].pmi_out.extend_from_slice(line.as_bytes());
                self.flush_pmi(i);
            }
        }
    }

    /// The child proxy whose host runs rank 0, if not this host.
    pub(super) fn child_with_rank0(&self) -> Option<usize> {
        self.children
            .iter()
            .position(|c| self.hello.plan.hosts[c.host].ranks.contains(&0))
    }

    /// Writes pending stdin into rank 0's pipe; acks what went (or was
    /// dropped because rank 0 is gone) so the front end may read on.
    pub(super) fn write_stdin(&mut self) {
        let st = &mut self.stdin;
        if let Some(fd) = st.pipe.as_ref().map(|f| f.as_raw_fd()) {
            while !st.pending.is_empty() {
                match sys::write(fd, &st.pending) {
                    Ok(n) => {
                        st.pending.drain(..n);
                        st.unacked += n as u64;
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        // Rank 0 closed its stdin or exited.
                        st.pipe = None;
                        break;
                    }
                }
            }
        }
        if st.pipe.is_none() && self.started {
            st.unacked += st.pending.len() as u64;
            st.pending.clear();
        }
        if st.eof && st.pending.is_empty() {
            st.pipe = None;
        }
        if st.unacked > 0 {
            let bytes = std::mem::take(&mut st.unacked);
            self.up.send_msg(Msg::StdinAck { bytes });
        }
    }

    pub(super) fn read_pmi(&mut self, i: usize, buf: &mut [u8]) {
        let Some(fd) = self.ranks[i].pmi.as_ref().map(|f| f.as_raw_fd()) else {
            return;
        };
        match sys::read(fd, buf) {
            Ok(0) => self.ranks[i].pmi = None,
            Ok(n) => self.ranks[i].pmi_in.push(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) => {}
            Err(_) => self.ranks[i].pmi = None,
        }
        while self.ranks[i].pmi_out.len() < MAX_QUEUED_REPLY {
            let Some(cmd) = self.ranks[i].pmi_in.next_request() else {
                break;
            };
            let r = self.ranks[i].rank;
            let out = self.server.handle_request(r, cmd);
            self.deliver(out.replies);
            for n in out.notices {
                match n {
                    Notice::Initialized(_) => self.ranks[i].inited = true,
                    Notice::Finalized(_) => self.ranks[i].finalized = true,
                    Notice::Abort { rank, code, msg } => {
                        self.up.send_msg(Msg::Abort { rank, code, msg })
                    }
                    Notice::Protocol { rank, what } => {
                        eprintln!("gwrun: rank {rank}: PMI protocol error: {what}")
                    }
                    Notice::Close { rank, what } => {
                        self.flush_pmi(i);
                        self.ranks[i].pmi = None;
                        eprintln!("gwrun: rank {rank} broke the PMI protocol ({what}); its PMI connection is closed");
                    }
                    Notice::BarrierReady { world: 0 } => {
                        self.own_fence = Some(self.server.take_fresh_of(0));
                        self.maybe_fence_up();
                    }
                    Notice::BarrierReady { world } => self.world_barrier_ready(world),
                    // The front end places the new processes (proxy/spawn.rs).
                    Notice::Spawn { rank, apps, preput } => self.request_spawn(rank, apps, preput),
                }
            }
        }
    }

    pub(super) fn flush_pmi(&mut self, i: usize) {
        let rk = &mut self.ranks[i];
        let Some(fd) = rk.pmi.as_ref().map(|f| f.as_raw_fd()) else {
            rk.pmi_out.clear();
            return;
        };
        while !rk.pmi_out.is_empty() {
            match sys::write(fd, &rk.pmi_out) {
                Ok(n) => {
                    rk.pmi_out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    rk.pmi_out.clear();
                    rk.pmi = None;
                    return;
                }
            }
        }
    }

    pub(super) fn read_stream(&mut self, i: usize, k: usize, buf: &mut [u8]) {
        let rank = self.ranks[i].rank as u32;
        let (fd_slot, pending) = &mut self.ranks[i].streams[k];
        let Some(fd) = fd_slot.as_ref().map(|f| f.as_raw_fd()) else {
            return;
        };
        let eof = match sys::read(fd, buf) {
            Ok(0) => true,
            Ok(n) => {
                pending.extend_from_slice(&buf[..n]);
                false
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                false
            }
            Err(_) => true,
        };
        if eof {
            *fd_slot = None;
        }
        if let Some(data) = take_lines(pending, eof) {
            self.up.send(&Frame::Output {
                rank,
                stream: k as u8 + 1,
                data,
            });
        }
    }

    pub(super) fn reap(&mut self) {
        while let Some((pid, exit)) = sys::reap_one() {
            let Some(i) = self.ranks.iter().position(|x| x.pid == pid) else {
                continue; // a child proxy's ssh, or an orphaned grandchild
            };
            // Output still in the pipes goes first (the front end prints
            // it before it reports the exit).
            let mut buf = vec![0u8; 64 * 1024];
            for k in 0..2 {
                for _ in 0..64 {
                    if self.ranks[i].streams[k].0.is_none() {
                        break;
                    }
                    self.read_stream(i, k, &mut buf);
                }
            }
            let rk = &mut self.ranks[i];
            rk.exit = Some(exit);
            let (code, signal) = match exit {
                Exit::Code(c) => (Some(c), None),
                Exit::Signal(s) => (None, Some(s)),
            };
            let m = Msg::Exit {
                rank: rk.rank,
                code,
                signal,
                inited: rk.inited,
                finalized: rk.finalized,
            };
            self.up.send_msg(m);
        }
    }
}

/// Complete lines of `pending` (and an over-long or final partial line,
/// ending in `\n`), removed from it.
pub fn take_lines(pending: &mut Vec<u8>, at_eof: bool) -> Option<Vec<u8>> {
    let cut = match pending.iter().rposition(|&b| b == b'\n') {
        Some(nl) => nl + 1,
        None => 0,
    };
    let mut out: Vec<u8> = pending.drain(..cut).collect();
    if !pending.is_empty() && (at_eof || pending.len() > MAX_PARTIAL_LINE) {
        out.append(pending);
        out.push(b'\n');
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_kept_whole() {
        let mut p = b"a\nb\nc".to_vec();
        assert_eq!(take_lines(&mut p, false), Some(b"a\nb\n".to_vec()));
        assert_eq!(p, b"c");
        assert_eq!(take_lines(&mut p, false), None);
        assert_eq!(take_lines(&mut p, true), Some(b"c\n".to_vec()));
        let mut long = vec![b'x'; MAX_PARTIAL_LINE + 1];
        assert_eq!(
            take_lines(&mut long, false).map(|v| v.len()),
            Some(MAX_PARTIAL_LINE + 2)
        );
    }
}
