//! The cluster's own state, for `stampkv stats --etcd`: each member's status and the
//! alarms raised (a `NOSPACE` alarm: the storage quota is used up).

use crate::error::storage_error;
use crate::store::EtcdStore;
use etcd_client::{AlarmAction, AlarmType, Client, ConnectOptions};
use stampkv::KvError;

/// One member's answer to a status request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemberStatus {
    /// The member's id.
    pub member_id: u64,
    /// Its etcd version.
    pub version: String,
    /// The size of its backend database file, in bytes (what the storage quota limits).
    pub db_size: i64,
    /// Whether it is the leader.
    pub is_leader: bool,
    /// Its Raft term and index.
    pub raft_term: u64,
    /// Its Raft index.
    pub raft_index: u64,
    /// The errors it reports (an alarm, for one).
    pub errors: Vec<String>,
}

impl EtcdStore {
    /// The status of the member at each endpoint the store was opened with, in that
    /// order; a member that does not answer within the connect timeout gives an error.
    pub fn member_statuses(&self) -> Vec<(String, Result<MemberStatus, KvError>)> {
        let options = self.options().clone();
        options
            .endpoints
            .iter()
            .map(|endpoint| {
                let target = endpoint.clone();
                let connect = ConnectOptions::new()
                    .with_connect_timeout(options.connect_timeout)
                    .with_timeout(options.request_timeout);
                let answer = self.bridge().run(async move {
                    let mut client = Client::connect([target], Some(connect)).await?;
                    client.status().await
                });
                let status = match answer {
                    None => Err(KvError::Closed),
                    Some(Err(e)) => Err(storage_error("member status", e)),
                    Some(Ok(status)) => {
                        let member_id = status.header().map_or(0, |h| h.member_id());
                        Ok(MemberStatus {
                            member_id,
                            version: status.version().to_string(),
                            db_size: status.db_size(),
                            is_leader: member_id != 0 && member_id == status.leader(),
                            raft_term: status.raft_term(),
                            raft_index: status.raft_index(),
                            errors: status.errors().to_vec(),
                        })
                    }
                };
                (endpoint.clone(), status)
            })
            .collect()
    }

    /// The alarms raised in the cluster: `(member id, alarm)`, such as `NOSPACE` when a
    /// member's storage quota is used up (etcd then refuses every write until an operator
    /// frees space, defragments and disarms it).
    pub fn alarms(&self) -> Result<Vec<(u64, String)>, KvError> {
        let mut client = self.client();
        let answer = self
            .bridge()
            .run(async move { client.alarm(AlarmAction::Get, AlarmType::None, None).await })
            .ok_or(KvError::Closed)?
            .map_err(|e| storage_error("list the alarms", e))?;
        Ok(answer
            .alarms()
            .iter()
            .map(|alarm| {
                let name = match alarm.alarm() {
                    AlarmType::Nospace => "NOSPACE".to_string(),
                    AlarmType::Corrupt => "CORRUPT".to_string(),
                    AlarmType::None => "NONE".to_string(),
                };
                (alarm.member_id(), name)
            })
            .collect())
    }
}
