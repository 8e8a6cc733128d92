//! Starting the components so that none outlives this process: each runs under `setpriv
//! --pdeathsig KILL`, and the kernel sends that signal when the *thread* that forked it ends,
//! so every component is forked from one thread that lives as long as the process.

use std::{
    io,
    process::{Child, Command},
    sync::{Mutex, OnceLock, mpsc},
};

type Request = (Command, mpsc::Sender<io::Result<Child>>);

/// Starts `program` with `args`, its output appended to `log`, tied to this process's life.
pub(crate) fn start(program: &std::path::Path, args: &[String], log: &std::path::Path) -> io::Result<Child> {
    let out = std::fs::OpenOptions::new().create(true).append(true).open(log)?;
    let mut cmd = Command::new("setpriv");
    cmd.args(["--pdeathsig", "KILL", "--"]).arg(program).args(args);
    cmd.stdin(std::process::Stdio::null()).stdout(out.try_clone()?).stderr(out);
    spawn(cmd)
}

fn spawn(cmd: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Request>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Request>();
        std::thread::Builder::new()
            .name("control-plane-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("a thread can be started");
        Mutex::new(tx)
    });
    let (tx, rx) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((cmd, tx))
        .map_err(|_| io::Error::other("the spawning thread is gone"))?;
    rx.recv().map_err(|_| io::Error::other("the spawning thread is gone"))?
}
