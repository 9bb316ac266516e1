//! A 127.0.0.1 address where every connection is refused, reserved for as long as the value
//! lives. A port taken from a listener that was then dropped is not that: a fake server started
//! by a test running beside it may be given the same port and receive the requests.

use std::net::SocketAddr;

pub struct RefusedAddr {
    /// Bound and never listening: connects get RST, and nothing else can bind the port.
    _socket: socket2::Socket,
    pub addr: SocketAddr,
}

pub fn refused_addr() -> RefusedAddr {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket
        .bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
        .unwrap();
    let addr = socket.local_addr().unwrap().as_socket().unwrap();
    RefusedAddr {
        _socket: socket,
        addr,
    }
}
