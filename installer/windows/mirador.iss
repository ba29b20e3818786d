; Inno Setup script for the Windows installer. Unverified here (built on Linux); the release
; workflow runs it on windows-latest:
;   iscc -DAppVersion=0.1.0 -DSourceDir=C:\path\to\dist\mirador -OC:\path\to\dist installer\windows\mirador.iss
; SourceDir is the PyInstaller one-folder app (installer/mirador.spec): mirador-gui.exe (windowed,
; opens the tray app) and mirador.exe (console, the CLI) next to their shared _internal\ folder.
; Per-user install by default (no admin prompt); the person can choose all users instead.

#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif
#ifndef SourceDir
  #define SourceDir "..\..\dist\mirador"
#endif
#define AppName "Mirador"
#define GuiExe "mirador-gui.exe"
#define CliExe "mirador.exe"

[Setup]
AppId={{6F0B7C2E-5D1A-4E2B-9C3F-4A8D2B1E7C90}
AppName={#AppName}
AppVersion={#AppVersion}
AppPublisher=Mirador
AppComments=Local memory for you and your AI assistants
DefaultDirName={autopf}\{#AppName}
DefaultGroupName={#AppName}
DisableProgramGroupPage=yes
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
Compression=lzma2/normal
SolidCompression=yes
LZMAUseSeparateProcess=yes
OutputBaseFilename=Mirador-{#AppVersion}-windows-x64-setup
SetupIconFile=..\..\assets\icons\mirador.ico
UninstallDisplayIcon={app}\{#GuiExe}
UninstallDisplayName={#AppName}
WizardStyle=modern
ChangesEnvironment=yes

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked
Name: "autostart"; Description: "Start Mirador when I sign in"; GroupDescription: "Startup:"; Flags: unchecked
Name: "addtopath"; Description: "Add the mirador command to PATH"; GroupDescription: "Command line:"

[Files]
Source: "{#SourceDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\{#AppName}"; Filename: "{app}\{#GuiExe}"; Comment: "Local memory for you and your AI assistants"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\{#GuiExe}"; Tasks: desktopicon
Name: "{userstartup}\{#AppName}"; Filename: "{app}\{#GuiExe}"; Tasks: autostart

[Registry]
; Per-user PATH entry for the console CLI (HKCU, so no admin rights are needed).
Root: HKCU; Subkey: "Environment"; ValueType: expandsz; ValueName: "Path"; ValueData: "{olddata};{app}"; \
  Tasks: addtopath; Check: NeedsAddPath(ExpandConstant('{app}'))

[Run]
Filename: "{app}\{#CliExe}"; Parameters: "doctor"; Description: "Check the installation (mirador doctor)"; \
  Flags: postinstall skipifsilent unchecked runascurrentuser
Filename: "{app}\{#GuiExe}"; Description: "{cm:LaunchProgram,{#AppName}}"; Flags: postinstall nowait skipifsilent

[UninstallDelete]
; Only what the app writes next to itself; the person's data (%LOCALAPPDATA%\mirador) is kept.
Type: filesandordirs; Name: "{app}\_internal\__pycache__"

[Code]
function NeedsAddPath(Dir: string): Boolean;
var
  Current: string;
begin
  if not RegQueryStringValue(HKEY_CURRENT_USER, 'Environment', 'Path', Current) then
    Result := True
  else
    Result := Pos(';' + Uppercase(Dir) + ';', ';' + Uppercase(Current) + ';') = 0;
end;
