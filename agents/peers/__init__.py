"""The channel between the agents of one cluster, on each agent's HTTP port: cached
chunks of the zone's distributed file cache (`agents.zone_cache`) and group requests
relayed to their coordinator (`agents.groups.relay`). Every call is signed with the
cluster's peer secret (`auth`), which only agents holding the cluster's agent key get."""
