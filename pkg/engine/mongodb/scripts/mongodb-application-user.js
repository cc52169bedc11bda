// Creates the Database's application user. The official mongo image's entrypoint runs each
// /docker-entrypoint-initdb.d/*.js once, when it initialises an empty data directory, with
// mongosh authenticated as the root user of MONGO_INITDB_ROOT_USERNAME, and `db` the
// database MONGO_INITDB_DATABASE names: the Database's database, where the user is created
// (clients authenticate with authSource=<database>), with readWrite and dbAdmin there only.
// Its name is APPLICATION_USERNAME; its password the content of APPLICATION_PASSWORD_FILE
// without trailing newlines, as the entrypoint reads its own *_FILE variables.
const user = process.env.APPLICATION_USERNAME;
const passwordFile = process.env.APPLICATION_PASSWORD_FILE;
if (!user || !passwordFile) {
  throw new Error("APPLICATION_USERNAME and APPLICATION_PASSWORD_FILE must be set");
}
const password = require("fs").readFileSync(passwordFile, "utf8").replace(/\n+$/, "");
if (password === "") {
  throw new Error("the application user's password file " + passwordFile + " is empty");
}
db.createUser({
  user: user,
  pwd: password,
  roles: [
    { role: "readWrite", db: db.getName() },
    { role: "dbAdmin", db: db.getName() },
  ],
});
print("created the application user " + user + " in database " + db.getName());
