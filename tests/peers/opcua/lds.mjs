// A node-opcua Local Discovery Server for the OPC UA handler's tests.
// Usage: node lds.mjs --port 4840 --pki DIR [--name PeersLDS]
// Prints "READY opc.tcp://127.0.0.1:<port>" once it listens, "REGISTERED
// <uri>" / "UNREGISTERED <uri>" as servers come and go; stops on SIGTERM.
// Run it inside a private network namespace: it always announces on mDNS.
import { OPCUACertificateManager } from "node-opcua";
import { OPCUADiscoveryServer } from "node-opcua-server-discovery";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    port: { type: "string", default: "4840" },
    pki: { type: "string" },
    name: { type: "string", default: "PeersLDS" },
  },
});
if (!values.pki) throw new Error("--pki DIR is required");

const lds = new OPCUADiscoveryServer({
  port: Number(values.port),
  hostname: "127.0.0.1",
  serverCertificateManager: new OPCUACertificateManager({
    rootFolder: values.pki,
    automaticallyAcceptUnknownCertificate: true,
  }),
  automaticallyAcceptUnknownCertificate: true,
  serverInfo: {
    applicationName: { text: values.name },
    applicationUri: `urn:dowser:peers:${values.name}`,
  },
});

// The LDS endpoint accepts 20 connections and has no option to change it;
// 50 servers registering at once need more. The endpoint is made at start.
const createEndpoints = lds._delayInit;
lds._delayInit = async () => {
  await createEndpoints();
  for (const endpoint of lds.endpoints) endpoint.maxConnections = 500;
};

lds.on("onRegisterServer", (server, firstTime) => {
  if (firstTime) console.log(`REGISTERED ${server.serverUri}`);
});
lds.on("onUnregisterServer", (server) => console.log(`UNREGISTERED ${server.serverUri}`));

await lds.start();
console.log(`READY opc.tcp://127.0.0.1:${values.port}`);

process.on("SIGTERM", async () => {
  await lds.shutdown();
  process.exit(0);
});
