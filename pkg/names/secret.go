package names

// Keys of the credentials Secret. The StatefulSet reads the user names and the database
// through secretKeyRef and the passwords as files (engine.CredentialsVolume); host, port and
// the URIs are for clients.
const (
	// SecretKeyUsername is the application user (engine.Recipe.Username): the user clients
	// connect as, which owns the Database's database and has no superuser rights.
	SecretKeyUsername = "username"
	// SecretKeyPassword is the application user's password.
	SecretKeyPassword = "password"
	// SecretKeySuperuserUsername and SecretKeySuperuserPassword are the engine's superuser
	// (engine.Recipe.SuperuserUsername), which the engine creates at initialisation and no
	// URI names: PostgreSQL's POSTGRES_USER, MySQL's root, MongoDB's root user.
	SecretKeySuperuserUsername = "superuser-username"
	SecretKeySuperuserPassword = "superuser-password"
	// SecretKeyDatabase is the Database's database (engine.Recipe.DatabaseName), which the
	// engine creates at initialisation, or MongoDB on first write.
	SecretKeyDatabase = "database"
	// SecretKeyHost is the client Service's DNS name, "<name>.<namespace>.svc.<domain>"
	// (ServiceHost).
	SecretKeyHost = "host"
	// SecretKeyPort is the engine port in decimal, e.g. "5432".
	SecretKeyPort = "port"
	// SecretKeyURI is a connection URI with the application user's credentials, e.g.
	// "postgresql://app:…@db.ns.svc.cluster.local:5432/db".
	SecretKeyURI = "uri"
	// SecretKeyReadHost and SecretKeyReadURI are the read Service's DNS name,
	// "<name>-read.<namespace>.svc.<domain>", and a URI through it: present while
	// replicas > 1 on an engine that replicates (engine.Recipe.ReplicationUsername).
	SecretKeyReadHost = "read-host"
	SecretKeyReadURI  = "read-uri"
	// SecretKeyReplicationUsername and SecretKeyReplicationPassword are the role replicas
	// connect to the primary as, on an engine that replicates.
	SecretKeyReplicationUsername = "replication-username"
	SecretKeyReplicationPassword = "replication-password"
	// SecretKeyKeyFile is the shared key the members of a replica set
	// (engine.Recipe.ReplicaSet) authenticate to each other with, MongoDB's security.keyFile:
	// base64 characters only, 6 to 1024 of them
	// (https://www.mongodb.com/docs/manual/core/security-internal-authentication/#keyfiles).
	// It is never stored in the data directory: every member reads it when it starts.
	SecretKeyKeyFile = "keyfile"
)
