//! Accepting connections on the listening socket.

use super::*;

impl TcpMethod {
    pub(super) fn accept_all(&self) {
        loop {
            match self.listener.accept() {
                Ok((s, _)) => {
                    if let Err(e) = self.register(s, HsState::AwaitHello, u32::MAX) {
                        eprintln!(
                            "gw[{}]: tcp: cannot register accepted connection: {e}",
                            self.me
                        );
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    eprintln!("gw[{}]: tcp: accept: {e}", self.me);
                    return;
                }
            }
        }
    }
}
