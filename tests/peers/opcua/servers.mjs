// node-opcua servers for the OPC UA handler's tests, all in one process.
// Usage: node servers.mjs --port FIRST --names A,B,... --pki DIR [--lds URL]
//                         [--hostname H]   (the host its URLs name; 127.0.0.1)
// Server i listens on 127.0.0.1:FIRST+i, is named names[i] with application
// URI urn:dowser:peers:<name>, and registers with the LDS when --lds is
// given (else it registers nowhere). Prints "STARTED <name> <url>" for each,
// then "READY" once all listen (and are registered); stops on SIGTERM,
// unregistering from the LDS.
import { OPCUACertificateManager, OPCUAServer, RegisterServerMethod } from "node-opcua";
import { parseArgs } from "node:util";
import path from "node:path";

const { values } = parseArgs({
  options: {
    port: { type: "string", default: "4841" },
    names: { type: "string", default: "PeersTestServer" },
    pki: { type: "string" },
    lds: { type: "string" },
    hostname: { type: "string", default: "127.0.0.1" },
  },
});
if (!values.pki) throw new Error("--pki DIR is required");

function makeServer(name, port) {
  return new OPCUAServer({
    port,
    hostname: values.hostname,  // the host its endpoint URLs name
    serverCertificateManager: new OPCUACertificateManager({
      rootFolder: path.join(values.pki, name),  // one certificate per server, kept between runs
      automaticallyAcceptUnknownCertificate: true,
    }),
    serverInfo: { applicationName: { text: name }, applicationUri: `urn:dowser:peers:${name}` },
    registerServerMethod: values.lds ? RegisterServerMethod.LDS : RegisterServerMethod.HIDDEN,
    discoveryServerEndpointUrl: values.lds,
  });
}

async function start(server, name) {
  const registered = values.lds
    ? new Promise((resolve) => server.once("serverRegistered", resolve))
    : Promise.resolve();
  await server.start();
  await registered;
  console.log(`STARTED ${name} ${server.getEndpointUrl()}`);
}

const names = values.names.split(",");
const servers = names.map((name, i) => makeServer(name, Number(values.port) + i));
await Promise.all(servers.map((server, i) => start(server, names[i])));
console.log("READY");

process.on("SIGTERM", async () => {
  await Promise.all(servers.map((server) => server.shutdown(0)));
  process.exit(0);
});
