"""Connections and pools that follow the primary a Sentinel set names (redis_conn.py makes
the clients)."""

from __future__ import annotations

from typing import Any

from redis.asyncio.connection import BlockingConnectionPool, SSLConnection
from redis.asyncio.sentinel import SentinelConnectionPool, SentinelManagedConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

# The error a primary answers a write with when it has fewer replicas than min-replicas-to-write.
NO_REPLICAS = "NOREPLICAS"


class PrimaryConnection(SentinelManagedConnection):
    """A connection to the primary Sentinel names, asked again on every reconnect. redis-py
    asks the sentinels only when a pool hands a connection out; a client that holds one
    connection for good (BullMQ's worker clients, `single_connection_client`) reconnects it
    through `connect_check_health` at the address it had, and after a failover would dial the
    dead primary forever (tests/parser_svc/state/test_failover.py)."""

    async def connect_check_health(
        self, check_health: bool = True, retry_socket_connect: bool = True
    ) -> None:
        if not self.is_connected and self.connection_pool.is_master:
            self.host, self.port = await self.connection_pool.get_master_address()
        await super().connect_check_health(check_health, retry_socket_connect)

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        """A primary that refuses writes for want of replicas (`min-replicas-to-write`: cut
        off from them, or replaced by one of them while it was still up) is left like a
        demoted one: the connection closes, and its next use asks the sentinels again."""
        try:
            return await super().read_response(*args, **kwargs)
        except ResponseError as err:
            if NO_REPLICAS in str(err) and self.connection_pool.is_master:
                await self.disconnect()
                raise RedisConnectionError(f"the primary refuses writes: {err}") from err
            raise


class PrimarySSLConnection(PrimaryConnection, SSLConnection):
    """The same over TLS."""


class BlockingSentinelPool(SentinelConnectionPool, BlockingConnectionPool):
    """The Sentinel pool (it finds the primary) that waits for a free connection."""
