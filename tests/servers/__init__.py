"""Real servers for the integration and fault tests: no mocks, no fakes. One module per kind.

- ``ports``: free loopback ports and unique topic/group/namespace names.
- ``process``: the owned child process every server builds on (each kills exactly its own).
- ``redis_server``: ``RedisServer`` (AOF ``everysec``) and ``start_replica``.
- ``sentinel``: ``RedisSentinelGroup``, a primary with replicas and sentinels.
- ``redis_cluster``: ``RedisClusterServers`` and the ``failover_topology`` (cluster or sentinel).
- ``kafka_broker``: ``KafkaBroker`` (tansu, in memory) and the test consumer-group timeouts.
- ``proxies``: ``PartitionProxy`` and ``TLSProxy`` in front of either server.
- ``kafka_sasl``: ``KafkaSASLProxy``, a SASL (PLAIN, SCRAM) gateway in front of the broker.
- ``prometheus_server``: ``PrometheusServer`` (Debian's ``prometheus``), scraping given targets.

``NOVELD_TEST_REDIS`` (a redis URL) and ``NOVELD_TEST_KAFKA`` (host:port) point the fixtures at
existing servers instead; those are not ours to kill, so ``kill``/``restart`` on them skip the
calling test with the reason.
"""
