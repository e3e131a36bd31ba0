DROP TABLE heartbeat_keys;
