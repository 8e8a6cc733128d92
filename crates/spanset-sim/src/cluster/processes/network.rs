//! The pods' network when real processes run: each pod has a network namespace of its own, so
//! that `localhost` in a pod is the pod and two pods may listen on one port, as on a real node.
//!
//! One sandbox makes one network namespace of its own for all its pods, the *pod network*
//! ([`PodNetwork`]), held by a process that only sleeps. Each pod's namespace is joined to it by
//! a veth pair: the pod's end is `eth0`, holding the pod IP as a `/32`, with its cluster's
//! gateway as the next hop for everything; the pod network routes each pod IP to its veth and
//! forwards between them, answering ARP for what lies behind it (`proxy_arp`), as a node's
//! routing CNI plugin does. The pod network reaches this machine through one more veth pair,
//! whose end here holds each cluster's gateway (its in-cluster API address, `a.b.0.1`) and DNS
//! address (`a.b.0.53`) and routes the cluster's `/16` into the pod network: this machine is
//! the pods' node, so kubectl, tests and probes reach pod IPs as a kubelet does, and pods reach
//! the sandbox's API and DNS servers listening on those addresses.
//!
//! Everything is made with `ip` (iproute2) and lives as long as the holder: when the sandbox
//! ends, even by SIGKILL, the holder gets SIGKILL, its namespace goes, and with it every veth
//! pair, the addresses and routes here, and the pod IPs.
//!
//! The clusters' `/16`s are taken from `100.64.0.0/10` (shared address space, which no LAN
//! and no other sandbox of this machine then uses: a route here that already exists for one is
//! a claim someone else holds).

use std::{
    io,
    net::Ipv4Addr,
    process::{Child, Command, Stdio},
    sync::atomic::{AtomicU64, Ordering},
};

/// The first `/16` a cluster's pods may get: `100.64.0.0`.
const FIRST: u8 = 64;
/// How many `/16`s there are to take (`100.64.0.0/10`).
const CLAIMABLE: u8 = 64;

/// The sandbox's pod network: its holder and the link to this machine.
pub struct PodNetwork {
    holder: Child,
    /// The name of the link's end on this machine.
    link: String,
    /// Counts veth pairs, so that each pod's end in the pod network has a name of its own.
    pairs: AtomicU64,
}

/// A cluster's gateway in its pod network `a.b.0.0/16`: `a.b.0.1`, where its pods reach this
/// machine, and where the sandbox serves them its API.
pub fn gateway(pod_network: Ipv4Addr) -> Ipv4Addr {
    let [a, b, ..] = pod_network.octets();
    Ipv4Addr::new(a, b, 0, 1)
}

/// Runs `ip -batch -` with `commands`, in the network namespace of `pid` when given; an error
/// carries what `ip` said.
fn ip_batch(pid: Option<u32>, commands: &str) -> io::Result<()> {
    let mut cmd = match pid {
        Some(pid) => {
            let mut c = Command::new("nsenter");
            c.args(["--target", &pid.to_string(), "--net", "--", "ip"]);
            c
        }
        None => Command::new("ip"),
    };
    cmd.args(["-batch", "-"]).stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("piped");
        stdin.write_all(commands.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    match out.status.success() {
        true => Ok(()),
        false => Err(io::Error::other(format!("ip: {}", String::from_utf8_lossy(&out.stderr).trim()))),
    }
}

/// Sets sysctls (`net/ipv4/...` paths under `/proc/sys`) in the network namespace of `pid`:
/// from a process inside it, since `/proc/sys/net` is the namespace of whoever opens it.
fn sysctls(pid: u32, settings: &[(&str, &str)]) -> io::Result<()> {
    let script: String = settings.iter().map(|(k, v)| format!("echo {v} > /proc/sys/{k}\n")).collect();
    let out = Command::new("nsenter")
        .args(["--target", &pid.to_string(), "--net", "--", "/bin/sh", "-ec", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    match out.status.success() {
        true => Ok(()),
        false => Err(io::Error::other(format!(
            "cannot configure the pod network: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
    }
}

impl PodNetwork {
    /// Makes the pod network and its link to this machine; needs root (the link's end here is
    /// an interface of this machine's).
    pub fn new() -> io::Result<Self> {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--pdeathsig", "KILL", "unshare", "--net", "--"]).args(super::launch::HOLD);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let holder = super::launch::spawn(cmd)?;
        let pid = holder.id();
        static LINKS: AtomicU64 = AtomicU64::new(0);
        // Unique on this machine: the sandbox's process ID and a count within it.
        let link = format!("spn{}x{}", std::process::id(), LINKS.fetch_add(1, Ordering::Relaxed));
        let mut net = Self { holder, link, pairs: AtomicU64::new(0) };
        super::launch::wait_for_own_namespace(&mut net.holder, "net")?;
        let link = &net.link;
        ip_batch(None, &format!("link add name {link} type veth peer name uplink netns {pid}\nlink set {link} up\n"))?;
        ip_batch(Some(pid), "link set lo up\nlink set uplink up\nroute add default dev uplink\n")?;
        // It forwards between the pods' veths and the link, and answers ARP for what it routes
        // elsewhere: pods ask for their gateway, this machine for pod IPs, on one link each.
        sysctls(
            pid,
            &[
                ("net/ipv4/ip_forward", "1"),
                ("net/ipv4/conf/all/proxy_arp", "1"),
                ("net/ipv4/conf/default/proxy_arp", "1"),
                ("net/ipv4/conf/uplink/proxy_arp", "1"),
            ],
        )?;
        Ok(net)
    }

    /// Claims a `/16` of `100.64.0.0/10` for one cluster's pods: routes it from this machine
    /// into the pod network and gives this machine its gateway and DNS addresses there. A
    /// `/16` whose route exists is taken (by another cluster, another sandbox or the machine).
    pub fn claim(&self) -> io::Result<Ipv4Addr> {
        let mut last = None;
        for k in 0..CLAIMABLE {
            let net = Ipv4Addr::new(100, FIRST + k, 0, 0);
            let link = &self.link;
            match ip_batch(None, &format!("route add {net}/16 dev {link}\n")) {
                Ok(()) => {
                    let (gw, dns) = (gateway(net), super::nameserver(net));
                    ip_batch(None, &format!("address add {gw}/32 dev {link}\naddress add {dns}/32 dev {link}\n"))?;
                    return Ok(net);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(io::Error::other(format!(
            "every pod network 100.64.0.0/16 to 100.127.0.0/16 is routed already ({})",
            last.map(|e| e.to_string()).unwrap_or_default()
        )))
    }

    /// Joins the network namespace of the process `pod` (a pod's holder) to the pod network:
    /// its `eth0` holds `ip` and routes everything through its cluster's gateway; the pod
    /// network routes `ip` to it.
    pub fn attach(&self, pod: u32, ip: Ipv4Addr, pod_network: Ipv4Addr) -> io::Result<()> {
        let holder = self.holder.id();
        let end = format!("p{}", self.pairs.fetch_add(1, Ordering::Relaxed));
        ip_batch(None, &format!("link add name {end} netns {holder} type veth peer name eth0 netns {pod}\n"))?;
        // A pod IP freed by a pod that is still going may still be routed to its old veth.
        ip_batch(Some(holder), &format!("link set {end} up\nroute replace {ip}/32 dev {end}\n"))?;
        let gw = gateway(pod_network);
        ip_batch(
            Some(pod),
            &format!(
                "link set lo up\naddress add {ip}/32 dev eth0\nlink set eth0 up\n\
                 route add {gw} dev eth0 scope link\nroute add default via {gw} dev eth0\n"
            ),
        )
    }

    /// The holder's process ID: `nsenter --target PID --net` runs a command in the pod network.
    pub fn pid(&self) -> u32 {
        self.holder.id()
    }
}

impl Drop for PodNetwork {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clusters_gateway_is_the_first_address_of_its_network() {
        assert_eq!(gateway(Ipv4Addr::new(100, 64, 0, 0)), Ipv4Addr::new(100, 64, 0, 1));
    }
}
