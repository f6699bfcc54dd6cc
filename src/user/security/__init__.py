"""Inter-site security on the Zenoh runtime: a test CA and certificates (`user certs`), TLS with mutual
authentication, and the routers' access control."""
