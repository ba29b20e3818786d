"""The few D-Bus calls capture makes (the Screenshot portal, KWin, GNOME Shell), over jeepney.

jeepney is pure Python and already installed with keyring (SecretStorage uses it), so Wayland
support adds no native dependency. Each error is turned into an OSError whose message names the
service and what it said, so the probes and the grabber report it as a failed call.
"""

from __future__ import annotations

from jeepney import DBusAddress, DBusErrorResponse, new_method_call
from jeepney.io.blocking import DBusConnection, open_dbus_connection


def session_bus() -> DBusConnection:
    """A connection to this session's bus; OSError saying what to do when there is none."""
    try:
        return open_dbus_connection(bus="SESSION")
    except (OSError, KeyError, ValueError) as e:
        raise OSError(f"no D-Bus session bus ({type(e).__name__}: {e}); start Mirador from your desktop session, "
                      "where DBUS_SESSION_BUS_ADDRESS is set") from e


def call(conn: DBusConnection, where: DBusAddress, method: str, signature: str | None = None, body: tuple = (),
         timeout: float = 5.0) -> tuple:
    """Call a method and return its reply's values; OSError for an error reply or no reply in time."""
    msg = new_method_call(where, method, signature, body)
    try:
        reply = conn.send_and_get_reply(msg, timeout=timeout)
    except TimeoutError as e:
        raise OSError(f"{where.bus_name} did not answer {where.interface}.{method} within {timeout:.0f}s") from e
    from jeepney.wrappers import unwrap_msg

    try:
        return unwrap_msg(reply)
    except DBusErrorResponse as e:
        raise OSError(f"{where.bus_name} refused {where.interface}.{method}: {e.name}: "
                      f"{e.data[0] if e.data else ''}") from e


BUS = DBusAddress("/org/freedesktop/DBus", bus_name="org.freedesktop.DBus", interface="org.freedesktop.DBus")


def name_owner(conn: DBusConnection, name: str) -> str:
    """The unique name (":1.42") of the connection owning `name` now: who may speak for that service.
    OSError when nobody owns it."""
    return call(conn, BUS, "GetNameOwner", "s", (name,))[0]


def has_name(conn: DBusConnection, name: str) -> bool:
    """True when a service owns `name` on this bus now (or can be started for it)."""
    if call(conn, BUS, "NameHasOwner", "s", (name,))[0]:
        return True
    return name in call(conn, BUS, "ListActivatableNames")[0]
